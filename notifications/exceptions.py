"""The errors notify() raises: one type per problem, all NotifyError, each naming what was wrong."""


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


class Rejected(Exception):
    """A critical event found its queue full for the whole wait budget. Nothing was published.

    ``retry_after`` is a hint in seconds: how long the queue needs to free room.
    """

    def __init__(self, message, retry_after):
        super().__init__(message)
        self.retry_after = retry_after


class QueueCeilingReached(RuntimeError):
    """A queue hit its hard safety ceiling. This is a bug or an outage, never a normal overload."""


class Unavailable(RuntimeError):
    """Redis (the broker) could not be reached or did not answer in time. The event may not have been
    published: retry it later. Raised instead of hanging; the socket timeouts bound the wait."""
