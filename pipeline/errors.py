"""The errors the engine raises; notifications re-exports them as part of the public API."""


class QueueCeilingReached(RuntimeError):
    """A queue hit its hard safety ceiling. This is a bug or an outage, never a normal overload."""


class Unavailable(RuntimeError):
    """Redis (the broker) could not be reached or did not answer in time. The event may not have been
    published: retry it later. Raised instead of hanging; the socket timeouts bound the wait."""
