"""The errors notify() raises: one type per problem, each naming what was wrong."""

from pipeline.errors import QueueCeilingReached, Unavailable

__all__ = [
    "InvalidEntityId",
    "InvalidIdempotencyKey",
    "InvalidPayload",
    "NotifyError",
    "PayloadTooLarge",
    "QueueCeilingReached",
    "Rejected",
    "Unavailable",
    "UnknownKind",
    "UnknownUser",
]


class NotifyError(ValueError):
    """Base class: the event was not published."""


class UnknownKind(NotifyError):
    """The kind is not in the registry (SLUICE_KINDS and the defaults)."""


class UnknownUser(NotifyError):
    """No user has this primary key."""


class InvalidPayload(NotifyError):
    """The payload is not a JSON object of JSON-serialisable values."""


class PayloadTooLarge(InvalidPayload):
    """The serialised payload is over SLUICE_MAX_PAYLOAD_BYTES."""


class InvalidEntityId(NotifyError):
    """The entity_id is missing, empty, of the wrong type, or too long."""


class InvalidIdempotencyKey(NotifyError):
    """The idempotency key is not a string, is empty or over 255 characters, or holds control characters."""


class Rejected(Exception):
    """A critical event found its queue full for the whole wait budget. Nothing was published.

    ``retry_after`` is a hint in seconds: how long the queue needs to free room.
    """

    def __init__(self, message, retry_after):
        super().__init__(message)
        self.retry_after = retry_after
