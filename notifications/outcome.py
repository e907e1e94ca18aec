"""What notify() did with an event."""

from enum import StrEnum


class Outcome(StrEnum):
    """The outcome of one notify() call; refusal is the Rejected exception, not an outcome."""

    ACCEPTED = "accepted"  # queued for individual delivery
    FOLDED = "folded"  # went into the digest
    COLLAPSED = "collapsed"  # background: only the latest state per key is kept
    DEFERRED = "deferred"  # a user who chose instant delivery, queue full: waits in the overflow for room
    SUPPRESSED = "suppressed"  # the user turned every channel of this kind off: counted, not sent
    SCHEDULED = "scheduled"  # sent later, at its send_at (notifications.scheduling): nothing published yet

    def __str__(self):
        return self.value
