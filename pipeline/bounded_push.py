"""The bounded push at the broker: one atomic check-and-push per message (push_bounded.lua), and refusals counted.

What a class does when its queue is full (wait, fold, collapse) is the class policy's business
(notifications.policy); the engine only tells it whether there was room.
"""

from functools import lru_cache

from pipeline import durability
from pipeline.connections import class_redis, script
from pipeline.redis import keys

from .errors import QueueCeilingReached
from .metrics import idempotent_replay_field, notifications_field

PUSHED, FULL, CEILING = 1, 0, -1


def push(queue, message, klass, idempotency=None, ttl_s=0):
    """Push ``message`` if ``queue`` has room: return PUSHED or FULL. Raise at the ceiling, and NotReplicated when a
    replicated class's replicas do not confirm the push in time (pipeline.durability).

    With ``idempotency`` (a key name, pipeline.redis.keys.idempotency) the push records "accepted" there for
    ``ttl_s`` seconds in the same step; if the key was recorded already, nothing is pushed and its value (an
    outcome's name, a str) is returned instead.
    """
    status = durability.run(
        script("push_bounded"),
        keys=[keys.counters(), idempotency or keys.NO_IDEMPOTENCY, *_queue_keys(queue.name)],
        args=[
            queue.capacity,
            queue.ceiling,
            message,
            notifications_field(klass, "accepted"),
            ttl_s if idempotency else 0,
            idempotent_replay_field(klass),
        ],
        client=class_redis(klass),
        queue=queue,
        klass=klass,
        step="admission",
    )
    if isinstance(status, (bytes, str)):
        return status.decode() if isinstance(status, bytes) else status
    if status == CEILING:
        raise QueueCeilingReached(f"queue {queue.name!r} is at its hard ceiling of {queue.ceiling} messages")
    return status


@lru_cache(maxsize=16)
def _queue_keys(queue_name):
    return tuple(keys.priority_lists(queue_name))


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
