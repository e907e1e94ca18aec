"""The contract every delivery channel backend fulfils, and the message it is given."""

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Message:
    """One rendered notification for one channel.

    ``id`` is the notification id (a digest's id for digests). It is stable across redeliveries,
    so a backend whose provider takes an idempotency key should pass it.
    """

    id: str
    channel: str
    kind: str
    klass: str
    user_id: object
    entity_id: str
    subject: str
    body: str
    payload: dict = field(default_factory=dict)
    count: int = 1
    # For a digest: when its oldest folded event happened (seconds since the epoch).
    first_seen: float | None = None


class SendError(Exception):
    """A send failed."""


class TransientSendError(SendError):
    """Worth retrying later: a timeout, a 5xx, a rate limit at the provider."""


class PermanentSendError(SendError):
    """Retrying cannot help: no address, a 4xx, a rejected recipient."""


class BaseChannel:
    """Subclasses implement send(message).

    send() returns once the provider accepted the message, or raises: TransientSendError to be
    retried, PermanentSendError to give up. Any other exception counts as transient. A backend is
    built once per worker process and may be called from several threads at once.
    """

    def __init__(self, name, **options):
        self.name = name
        self.options = options

    def send(self, message):
        """Deliver ``message`` or raise a SendError."""
        raise NotImplementedError(f"{type(self).__name__} must implement send()")
