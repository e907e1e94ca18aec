"""The errors the engine raises; notifications re-exports them as part of the public API."""


class QueueCeilingReached(RuntimeError):
    """A queue hit its hard safety ceiling. This is a bug or an outage, never a normal overload."""


class Unavailable(RuntimeError):
    """Redis (the broker) could not be reached or did not answer in time. The event may not have been
    published: retry it later. Raised instead of hanging; the socket timeouts bound the wait."""


class NotReplicated(RuntimeError):
    """A replicated class's write was not confirmed by enough replicas in time (WAIT): it is on the primary, maybe
    for good, maybe lost in a failover. ``step`` names what was written (pipeline.durability.STEPS)."""

    def __init__(self, klass, step, confirmed, replicas, timeout_ms):
        super().__init__(
            f"the {klass} {step} was not confirmed by {replicas} replica(s) within {timeout_ms} ms "
            f"({confirmed} confirmed)"
        )
        self.klass, self.step = klass, step
        self.confirmed, self.replicas, self.timeout_ms = confirmed, replicas, timeout_ms
        # The script's own reply (its writes are on the primary), for a caller that must finish what it began.
        self.reply = None


class WaitRefused(NotReplicated):
    """A replicated class's Redis refused the WAIT itself (an ACL user without ``+wait``, a proxy that does not
    take it): the script ran on the primary, and nothing is confirmed. ``reason`` is Redis's answer."""

    def __init__(self, klass, step, replicas, timeout_ms, reason):
        super().__init__(klass, step, 0, replicas, timeout_ms)
        self.args = (f"the {klass} {step} was not confirmed: Redis refused WAIT ({reason})",)
        self.reason = reason
