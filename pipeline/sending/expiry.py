"""Messages that expire: a kind's ``expires_after_s`` turns into a time after which its message is never sent."""

import time


class Expired(Exception):
    """The message's time ran out before a provider accepted it; it goes to the dead letters as ``expired``."""


def expires_at(kind, kwargs, published_at=None):
    """When the message of a send task expires (seconds since the epoch), or None when its kind never expires.

    notify() stamps ``expires_at`` into the message, so retries, requeues and replays keep the event's own
    deadline. A digest or a collapsed message has none: it expires ``expires_after_s`` after its latest event.
    """
    stamped = kwargs.get("expires_at")
    if isinstance(stamped, (int, float)) and not isinstance(stamped, bool):
        return float(stamped)
    if kind is None or not kind.expires_after_s:
        return None
    base = kwargs.get("last_seen") or published_at or time.time()
    return float(base) + kind.expires_after_s


def passed(when, now=None):
    """Whether the expiry ``when`` (None: never) has passed."""
    return when is not None and (time.time() if now is None else now) >= when
