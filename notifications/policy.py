"""The class policy: publish a validated event, and decide what its class does when the queue is full.

critical waits up to wait_ms for room, then raises Rejected. routine folds into the digest (or, for an
opted-out user, waits in the overflow). background collapses to its latest state. The engine's admission
(pipeline.admission) checks the bound and pushes in one atomic step; this module only decides.
"""

import logging
import time
from dataclasses import dataclass

from kombu.exceptions import OperationalError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from digest import store
from digest.flush import enqueue_size_flush
from pipeline.admission import PUSHED, count_rejection, push
from pipeline.conf import Kind, sluice_settings
from pipeline.depth import depth, drain_rate
from pipeline.message import event_kwargs_json, send_message

from .exceptions import Rejected, Unavailable
from .outcome import Outcome

logger = logging.getLogger("sluice.admission")

# Polling for room backs off from 2 ms to 25 ms: about a dozen tries in 250 ms, never a spin.
FIRST_POLL_S, MAX_POLL_S = 0.002, 0.025
BURST_WINDOW_S = 10


@dataclass(frozen=True, slots=True)
class Event:
    """A validated event, ready to publish."""

    kind: Kind
    notification_id: str
    user_id: object
    entity_id: str
    payload_json: str


def event_message(event, queue_name):
    """The Celery message that sends ``event``."""
    kind = event.kind
    # A kind that expires carries its deadline in the message, so retries and replays keep the event's own.
    extra = {"expires_at": round(time.time() + kind.expires_after_s, 3)} if kind.expires_after_s else {}
    kwargs = event_kwargs_json(
        event.notification_id, kind.name, event.user_id, event.entity_id, event.payload_json, **extra
    )
    return send_message(kind.klass, event.notification_id, kwargs, queue_name, kind.name)


def publish_event(event):
    """Admit ``event`` to its class queue; return its Outcome, or raise Rejected or Unavailable."""
    queue = sluice_settings().queues[event.kind.klass]
    try:
        return admit(event, queue, event_message(event, queue.name))
    except (RedisConnectionError, RedisTimeoutError, OperationalError) as exc:
        raise Unavailable(f"Redis at {_where()} is unavailable ({type(exc).__name__}: {exc}); retry later") from exc


def _where():
    return sluice_settings().redis_url.rsplit("@", 1)[-1]  # never the password


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
    current = depth(klass)
    rate = drain_rate(queue.name)
    # Seconds until the queue has room, from the drain rate the exporter last measured (or 1 s).
    retry_after = max(1.0, round((current - queue.capacity + 1) / rate + 0.5)) if rate else 1.0
    if count_rejection(klass, BURST_WINDOW_S):
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
