"""Email through Django's email framework (EMAIL_BACKEND, or the channel's own ``email_backend``)."""

import smtplib

from django.contrib.auth import get_user_model
from django.core.mail import EmailMessage, get_connection

from .base import BaseChannel, PermanentSendError, TransientSendError


class EmailChannel(BaseChannel):
    """Sends to the user's ``email`` field. Options: ``email_backend``, ``from_email``."""

    def send(self, message):
        User = get_user_model()
        address = User._default_manager.filter(pk=message.user_id).values_list("email", flat=True).first()
        if not address:
            raise PermanentSendError("the user has no email address")
        email = EmailMessage(
            subject=message.subject,
            body=message.body,
            from_email=self.options.get("from_email"),
            to=[address],
            headers={"X-Sluice-Id": message.id, "X-Sluice-Kind": message.kind},
            connection=get_connection(self.options.get("email_backend")),
        )
        try:
            email.send()
        except smtplib.SMTPRecipientsRefused as exc:
            raise PermanentSendError(f"recipient refused: {exc}") from exc
        except (smtplib.SMTPException, OSError) as exc:
            raise TransientSendError(f"SMTP failed: {exc}") from exc
