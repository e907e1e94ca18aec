"""Email through Django's email framework (EMAIL_BACKEND, or the channel's own ``email_backend``)."""

import smtplib

from django.apps import apps
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.mail import EmailMultiAlternatives, get_connection

from pipeline.text import single_line

from .base import Accepted, BaseChannel, PermanentSendError, SuppressedRecipient, TransientSendError


class EmailChannel(BaseChannel):
    """Sends to the user's email field (the user model's EMAIL_FIELD), text and HTML. Options: ``email_backend``,
    ``from_email``."""

    sends_html = True

    def send(self, message):
        address = address_of(message.user_id)
        email = EmailMultiAlternatives(
            # Headers are one line: a CR or LF makes Django refuse the message on every attempt.
            subject=single_line(message.subject),
            body=message.body,
            from_email=self.options.get("from_email"),
            to=[address],
            headers=headers_of(message),
            connection=get_connection(self.options.get("email_backend"), **timeout(message)),
        )
        if message.html:
            email.attach_alternative(message.html, "text/html")
        try:
            email.send()
        except smtplib.SMTPRecipientsRefused as exc:
            raise PermanentSendError(f"recipient refused: {exc}") from exc
        except (smtplib.SMTPException, OSError) as exc:
            raise TransientSendError(f"SMTP failed: {exc}") from exc
        return Accepted(None, address)


def headers_of(message):
    """The email's own headers: its notification id and kind, and for a kind that is not mandatory the one-click
    unsubscribe of RFC 8058 (List-Unsubscribe with List-Unsubscribe-Post), which mail clients show as a button."""
    # Headers are one line: a CR or LF makes Django refuse the message on every attempt.
    headers = {"X-Sluice-Id": single_line(message.id), "X-Sluice-Kind": single_line(message.kind)}
    if message.unsubscribe_url:
        headers["List-Unsubscribe"] = f"<{single_line(message.unsubscribe_url)}>"
        headers["List-Unsubscribe-Post"] = "List-Unsubscribe=One-Click"
    return headers


def timeout(message):
    """The connection's timeout within the send budget, as Django's backends take it (SMTP applies it)."""
    if message.deadline is None:
        return {}
    return {"timeout": max(0.1, message.time_left(getattr(settings, "EMAIL_TIMEOUT", None) or 30))}


def address_of(user_id):
    """The user's email address, checked: PermanentSendError without one, SuppressedRecipient when suppressed."""
    User = get_user_model()
    # A custom user model names its address field with EMAIL_FIELD ("email" by default).
    field = User.get_email_field_name()
    address = User._default_manager.filter(pk=user_id).values_list(field, flat=True).first()
    if not address:
        raise PermanentSendError("the user has no email address")
    refuse_suppressed(address)
    return address


def refuse_suppressed(address):
    """Raise SuppressedRecipient when ``address`` bounced hard or complained (the suppression list, in the admin)."""
    # Looked up by name: the suppression list belongs to the delivery wing, which itself uses the channels.
    Suppression = apps.get_model("sluice_notifications", "Suppression")

    reason = Suppression.reason_for(address)
    if reason is not None:
        raise SuppressedRecipient(f"the address is suppressed ({reason}); lift it in the admin to send again")
