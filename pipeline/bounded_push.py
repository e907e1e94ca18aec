"""The bounded push at the broker: one atomic check-and-push per message (push_bounded.lua), and refusals counted.

What a class does when its queue is full (wait, fold, collapse) is the class policy's business
(notifications.policy); the engine only tells it whether there was room.
"""

from functools import lru_cache

from pipeline import durability
from pipeline.connections import class_redis, script
from pipeline.redis import keys

from .errors import QueueCeilingReached
from .metrics import notifications_field

PUSHED, FULL, CEILING = 1, 0, -1


def push(queue, message, klass):
    """Push ``message`` if ``queue`` has room: return PUSHED or FULL. Raise at the ceiling, and NotReplicated when a
    replicated class's replicas do not confirm the push in time (pipeline.durability)."""
    status = durability.run(
        script("push_bounded"),
        keys=_push_keys(queue.name),
        args=[queue.capacity, queue.ceiling, message, notifications_field(klass, "accepted")],
        client=class_redis(klass),
        queue=queue,
        klass=klass,
        step="admission",
    )
    if status == CEILING:
        raise QueueCeilingReached(f"queue {queue.name!r} is at its hard ceiling of {queue.ceiling} messages")
    return status


@lru_cache(maxsize=16)
def _push_keys(queue_name):
    return [keys.counters(), *keys.priority_lists(queue_name)]


def opens_burst(klass, what, burst_window_s):
    """True for the first refusal of ``what`` in a burst (none in the last ``burst_window_s`` seconds), so the caller
    logs a burst once; the refusals themselves are counted where they happen."""
    return bool(class_redis(klass).set(keys.refused_burst(klass, what), 1, nx=True, ex=burst_window_s))


def count_rejection(klass, burst_window_s):
    """Count a refused event; return True when it opens a burst of refusals (so the caller logs it once)."""
    return bool(
        script("reject", on=class_redis(klass))(
            keys=[keys.counters(), keys.rejected_burst(klass)],
            args=[notifications_field(klass, "rejected"), burst_window_s],
        )
    )
