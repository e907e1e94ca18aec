"""Bounded admission: one atomic check-and-push per event, and what each class does when its queue is full.

critical waits up to wait_ms for room, then raises Rejected. routine folds into the digest (or, for an
opted-out user, waits in the overflow). background collapses to its latest state.
"""

import logging
import time
from functools import lru_cache

from notifications.conf import sluice_settings
from notifications.exceptions import QueueCeilingReached, Rejected
from notifications.outcome import Outcome

from . import keys
from .metrics import notifications_field
from .store import script

logger = logging.getLogger("sluice.admission")

PUSHED, FULL, CEILING = 1, 0, -1
# Polling for room backs off from 2 ms to 25 ms: about a dozen tries in 250 ms, never a spin.
FIRST_POLL_S, MAX_POLL_S = 0.002, 0.025
BURST_WINDOW_S = 10


def push(queue, message, klass):
    """Push ``message`` if ``queue`` has room: return PUSHED or FULL. Raise at the ceiling."""
    status = script("admit")(
        keys=_admit_keys(queue.name),
        args=[queue.capacity, queue.ceiling, message, notifications_field(klass, "accepted")],
    )
    if status == CEILING:
        raise QueueCeilingReached(f"queue {queue.name!r} is at its hard ceiling of {queue.ceiling} messages")
    return status


@lru_cache(maxsize=16)
def _admit_keys(queue_name):
    return [queue_name, keys.counters(), *keys.priority_lists(queue_name)[1:]]


def admit(event, queue, message):
    """Admit one validated event; return its Outcome or raise Rejected."""
    klass = event.kind.klass
    if push(queue, message, klass) == PUSHED:
        return Outcome.ACCEPTED
    if klass == "critical":
        return _wait_for_room(event, queue, message)
    return _fold(event, queue, message)


def _wait_for_room(event, queue, message):
    deadline = time.monotonic() + queue.wait_ms / 1000
    pause = FIRST_POLL_S
    while (left := deadline - time.monotonic()) > 0:
        time.sleep(min(pause, left))
        pause = min(pause * 2, MAX_POLL_S)
        if push(queue, message, "critical") == PUSHED:
            return Outcome.ACCEPTED
    _reject(event.kind.klass, queue)


def _reject(klass, queue):
    from .depth import depth, drain_rate

    current = depth(klass)
    rate = drain_rate(queue.name)
    # Seconds until the queue has room, from the drain rate the exporter last measured (or 1 s).
    retry_after = max(1.0, round((current - queue.capacity + 1) / rate + 0.5)) if rate else 1.0
    opened = script("reject")(
        keys=[keys.counters(), keys.rejected_burst(klass)],
        args=[notifications_field(klass, "rejected"), BURST_WINDOW_S],
    )
    if opened:
        logger.error(
            "%s queue %r full (%d of %d) for the whole wait budget: rejecting; later rejections in this burst are "
            "counted in sluice_notifications_total, not logged",
            klass,
            queue.name,
            current,
            queue.capacity,
        )
    raise Rejected(
        f"the {klass} queue is full ({current} of {queue.capacity}); retry in {retry_after:.0f} s",
        retry_after=retry_after,
    )


def _fold(event, queue, message):
    from digest import store
    from digest.flush import enqueue_size_flush

    klass = event.kind.klass
    code = store.fold(
        klass,
        event.user_id,
        event.kind.name,
        event.entity_id,
        event.payload_json,
        message,
        queue.overflow,
        sluice_settings().digest["max_keys"],
        opt_out=klass == "routine",
    )
    if code == store.OVERFLOW_FULL:
        logger.error("%s overflow for opted-out users is full: rejecting", klass)
        raise Rejected(f"the {klass} queue and its overflow are full", retry_after=1.0)
    if code == store.DEFERRED:
        return Outcome.DEFERRED
    if code == store.FOLDED_FLUSH:
        enqueue_size_flush()
    return Outcome.FOLDED if klass == "routine" else Outcome.COLLAPSED
