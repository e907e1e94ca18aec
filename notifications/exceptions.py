"""The errors notify() raises: one type per problem, each naming what was wrong."""

from pipeline.errors import QueueCeilingReached, Unavailable

__all__ = [
    "InvalidEntityId",
    "InvalidIdempotencyKey",
    "InvalidPayload",
    "InvalidSchedule",
    "InvalidTopic",
    "NotifyError",
    "PayloadTooLarge",
    "QueueCeilingReached",
    "Rejected",
    "ScheduleFull",
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


class InvalidSchedule(NotifyError):
    """A scheduled send's ``send_at`` is not an aware datetime or Unix seconds, is in the past, or is further ahead
    than SLUICE_SCHEDULE["horizon_days"]; or its ``key`` is not a short plain string."""


class InvalidTopic(NotifyError):
    """A topic name is not a string, is empty or too long (notifications.topics.models.MAX_TOPIC_LENGTH, an ingest
    token's service prefix included), or holds control characters."""


class ScheduleFull(NotifyError):
    """The user has SLUICE_SCHEDULE["max_per_user"] sends scheduled already."""


class Rejected(Exception):
    """A critical event found its queue full for the whole wait budget, or a scheduled critical send found no room in
    its window of its pool's rate. Nothing was published, nothing scheduled.

    ``retry_after`` is a hint in seconds: how long the queue needs to free room. For a scheduled send,
    ``available_at`` is the earliest second (Unix) at or after its window's start that has room, or None.
    """

    def __init__(self, message, retry_after, available_at=None):
        super().__init__(message)
        self.retry_after = retry_after
        self.available_at = available_at
