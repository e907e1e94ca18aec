"""Email through django-anymail: one ESP backend per provider, the notification id as the message's metadata (and as
the ESP's idempotency key where its API takes one), and anymail's errors mapped onto transient and permanent."""

from django.core.exceptions import ImproperlyConfigured
from django.core.mail import EmailMultiAlternatives, get_connection
from django.utils.module_loading import import_string

from .base import Accepted, BaseChannel, PermanentSendError, TransientSendError
from .email import address_of, headers_of

# ESPs whose send API takes an idempotency key, and the message header anymail hands it over in. A resend of the
# same notification id to one of them is delivered once; the others get the id as metadata only.
IDEMPOTENCY_HEADERS = {
    "anymail.backends.brevo.EmailBackend": "idempotencyKey",
    "anymail.backends.sendinblue.EmailBackend": "idempotencyKey",
}
# ESP answers about the message or its recipient: no retry and no other ESP can help. Everything else (401 and
# 403 are a provider's configuration, 404 a wrong domain or region, 429 and 5xx its load) is transient: the
# next provider is tried, and the breaker counts it.
PERMANENT_STATUSES = (400, 406, 413, 422)
DEFAULT_TIMEOUT_S = 10


class AnymailChannel(BaseChannel):
    """Sends to the user's ``email`` field through an anymail ESP backend.

    Options: ``email_backend`` (required: a dotted path such as "anymail.backends.postmark.EmailBackend"; Django's
    own backends work too), ``backend_options`` (the backend's keyword arguments: ``api_key``, ``server_token``,
    ``api_url`` ...; else anymail reads its ANYMAIL settings), ``from_email``, ``timeout_s`` (10, and never past the
    send's deadline), ``permanent_statuses``, ``idempotency_header`` (for an ESP not in IDEMPOTENCY_HEADERS),
    ``metadata`` (default true; false for an ESP that takes none).
    """

    sends_html = True

    def __init__(self, name, **options):
        super().__init__(name, **options)
        backend = options.get("email_backend")
        if not isinstance(backend, str) or not backend:
            raise ImproperlyConfigured(f"the {name!r} AnymailChannel needs options['email_backend'], a dotted path")
        import_string(backend)  # fails now, at the system check, rather than at the first send
        self.backend = backend
        self.backend_options = dict(options.get("backend_options") or {})
        self.timeout_s = float(options.get("timeout_s", DEFAULT_TIMEOUT_S))
        self.permanent = frozenset(options.get("permanent_statuses", PERMANENT_STATUSES))
        self.idempotency_header = options.get("idempotency_header", IDEMPOTENCY_HEADERS.get(backend))

    def send(self, message):
        from anymail.exceptions import (
            AnymailAPIError,
            AnymailInvalidAddress,
            AnymailRecipientsRefused,
            AnymailSerializationError,
        )

        address = address_of(message.user_id)
        timeout = message.time_left(self.timeout_s)
        if timeout <= 0:
            raise TransientSendError("no time left in the send budget")
        headers = headers_of(message)
        if self.idempotency_header:
            headers[self.idempotency_header] = message.id
        email = EmailMultiAlternatives(
            subject=message.subject,
            body=message.body,
            from_email=self.options.get("from_email"),
            to=[address],
            headers=headers,
            # A connection per send: every backend applies its timeout when it connects, and none is left stale.
            connection=get_connection(self.backend, timeout=timeout, **self.backend_options),
        )
        if self.options.get("metadata", True):
            # Most ESPs hand metadata back in their tracking webhooks: it ties an event to its notification.
            email.metadata = {"sluice_id": message.id, "sluice_channel": message.channel, "sluice_kind": message.kind}
            email.tags = [message.kind]
        if message.html:
            email.attach_alternative(message.html, "text/html")
        try:
            email.send()
        except (AnymailRecipientsRefused, AnymailInvalidAddress) as exc:
            raise PermanentSendError(f"recipient refused: {_first_line(exc)}") from exc
        except AnymailSerializationError as exc:
            raise PermanentSendError(f"the message cannot be sent to this ESP: {_first_line(exc)}") from exc
        except AnymailAPIError as exc:
            if exc.status_code in self.permanent:
                raise PermanentSendError(f"the ESP refused the message: {_first_line(exc)}") from exc
            raise TransientSendError(f"the ESP failed: {_first_line(exc)}") from exc
        except OSError as exc:  # Django's SMTP backend, or a backend that lets a socket error through
            raise TransientSendError(f"the ESP is unreachable: {exc}") from exc
        return Accepted(_message_id(email), address)


def _message_id(email):
    status = getattr(email, "anymail_status", None)
    found = getattr(status, "message_id", None)
    return found if isinstance(found, str) else None


def _first_line(exc):
    # anymail's messages go on to quote the ESP's whole answer, which may name the recipient.
    return str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
