"""The class policy: publish a validated event, and decide what its class does when the queue is full.

What the user chose comes first (a channel off, the digest, quiet hours, a cadence, a throttle), then the
class: critical waits up to wait_ms for room, then raises Rejected; routine folds into the digest (or, for a
user who chose instant delivery, waits in the overflow); background collapses to its latest state. All of it
is decided in one Redis round trip by admission (pipeline.admission), from the preferences mirrored into Redis; what
stays here is what the face does with the answer: wait for room, refuse loudly, or tell the caller Unavailable.
"""

import logging
import time
from contextlib import contextmanager
from typing import NamedTuple

from kombu.exceptions import OperationalError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import OutOfMemoryError, ReadOnlyError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from pipeline.activity_fields import ACCEPTED as LOG_ACCEPTED
from pipeline.activity_fields import REJECTED as LOG_REJECTED
from pipeline.admission import wire
from pipeline.admission.bounded_push import count_rejection, log_waited, opens_burst, push
from pipeline.admission.runner import admit
from pipeline.broker.depth import depth, drain_rate
from pipeline.conf import sluice_settings
from pipeline.connections import route
from pipeline.errors import NotReplicated, WaitRefused
from pipeline.metrics import count_unconfirmed
from pipeline.redis.addresses import describe
from pipeline.redis.cluster import CLUSTER_UNSETTLED

from .exceptions import QueueCeilingReached, Rejected, Unavailable
from .outcome import Outcome
from .scheduling import api as scheduling

logger = logging.getLogger("sluice.admission")

# Polling for room backs off from 2 ms to 25 ms: about a dozen tries in 250 ms, never a spin.
FIRST_POLL_S, MAX_POLL_S = 0.002, 0.025
BURST_WINDOW_S = 10
# A full fold store drains at the next flushes (every flush_interval_s); a refused caller comes back then.
FULL_STORE_RETRY_S = 60.0
# Redis's answer to a write on a primary with fewer good replicas than min-replicas-to-write (redis-py has no
# class of its own for it).
NO_REPLICAS = "NOREPLICAS"


class Published(NamedTuple):
    """What publishing one event came to: its Outcome, and whether that is a recorded one replayed (the event's
    idempotency key had been seen within SLUICE_IDEMPOTENCY_TTL_S; nothing was published this time)."""

    outcome: Outcome
    replayed: bool = False


def publish_event(event):
    """Admit ``event``; return its Outcome, or raise Rejected or Unavailable."""
    return publish(event).outcome


def publish(event):
    """Admit ``event``; return its Published (the Outcome, and whether it was replayed), or raise Rejected or
    Unavailable."""
    queue = sluice_settings().queues[event.kind.klass]
    with _unavailable(event.kind.klass):
        return decide(event, queue)


def publish_scheduled(event, send_at, key):
    """Schedule ``event`` for ``send_at`` (notifications.scheduling); return its Scheduled (SCHEDULED, moved,
    previous_sent), or raise Rejected, ScheduleFull or Unavailable."""
    with _unavailable(event.kind.klass):
        return scheduling.schedule(event, send_at, key)


@contextmanager
def _unavailable(klass):
    """Redis unreachable, full, read-only or not confirming: Unavailable, naming the Redis and why."""
    try:
        yield
    except WaitRefused as exc:
        # Not an outage but a setting (logged once per process by pipeline.durability): the same refusal comes back
        # until the ACL user may run WAIT. A retry with the same idempotency key is then answered, not sent again.
        count_unconfirmed(exc)
        raise Unavailable(
            f"Redis at {_where(klass, exc)} refused WAIT ({exc.reason}): the {exc.step} may be on the "
            "primary but is not confirmed by its replicas; its user needs +wait (docs/redis.md); retry"
        ) from exc
    except NotReplicated as exc:
        # A replicated class: admitted on the primary, maybe, but not confirmed durable; a failover could lose it.
        count_unconfirmed(exc)
        where = _where(klass, exc)
        raise Unavailable(
            f"Redis at {where}: the {exc.step} was not confirmed by {exc.replicas} replica(s) within {exc.timeout_ms} "
            f"ms ({exc.confirmed} confirmed); it may be on the primary but is not durable; retry"
        ) from exc
    except OutOfMemoryError as exc:
        # Redis at its maxmemory under noeviction: full, not broken; the caller retries later (ingest: 503).
        raise Unavailable(f"Redis at {_where(klass, exc)} is out of memory; retry later") from exc
    except (RedisConnectionError, RedisTimeoutError, OperationalError, ReadOnlyError, *CLUSTER_UNSETTLED) as exc:
        # ReadOnlyError: a replica (a primary demoted by a failover, before the client asked the sentinels again).
        # CLUSTER_UNSETTLED: a Redis Cluster whose slot stayed on the move, or that no node of answers.
        where = _where(klass, exc)
        raise Unavailable(f"Redis at {where} is unavailable ({type(exc).__name__}: {exc}); retry later") from exc
    except ResponseError as exc:
        if not str(exc).startswith(NO_REPLICAS):
            raise
        # A primary that lost its replicas (min-replicas-to-write): it refuses writes that a failover could lose.
        where = _where(klass, exc)
        raise Unavailable(f"Redis at {where} has too few replicas to accept writes ({exc}); retry later") from exc


def _where(klass, exc):
    # The class's Redis, or the digest's when the fold on it is what failed (digest/fold_store.py says so).
    url = getattr(exc, "sluice_redis_url", None) or sluice_settings().queues[klass].redis_url
    return describe(url)  # never the password


OUTCOMES = {
    wire.ACCEPTED: Outcome.ACCEPTED,
    wire.FOLDED: Outcome.FOLDED,
    wire.COLLAPSED: Outcome.COLLAPSED,
    wire.DEFERRED: Outcome.DEFERRED,
    wire.SUPPRESSED: Outcome.SUPPRESSED,
}


def decide(event, queue):
    """Decide one validated event's fate by its user's choices and its class (pipeline.admission: one round trip,
    two when it folds on the digest's own Redis); return its Published or raise Rejected. An event whose idempotency
    key is recorded gets the recorded outcome back from that same round trip."""
    done = admit(event)
    if done.outcome in OUTCOMES:
        return Published(OUTCOMES[done.outcome], done.replayed)
    if done.outcome == wire.CEILING:
        raise QueueCeilingReached(f"queue {queue.name!r} is at its hard ceiling of {queue.ceiling} messages")
    if done.outcome == wire.FULL:
        # The reply carries the message with its channels filled in: only the Lua fills them.
        return _wait_for_room(event, queue, done.message)
    klass = event.kind.klass
    if done.outcome == wire.OVERFLOW_FULL:
        if opens_burst(klass, "overflow", BURST_WINDOW_S):
            logger.error(
                "%s overflow for users who chose instant delivery is full: rejecting; later rejections in this burst "
                "are counted in sluice_notifications_total, not logged",
                klass,
            )
        raise Rejected(f"the {event.kind.klass} queue and its overflow are full", retry_after=1.0)
    if opens_burst(klass, "folds", BURST_WINDOW_S):
        logger.error(
            "the fold store is full (SLUICE_DIGEST max_fold_keys/max_fold_bytes): rejecting %s events; later "
            "rejections in this burst are counted in sluice_notifications_total, not logged",
            klass,
        )
    raise Rejected(f"the {event.kind.klass} queue and the digest's store are full", retry_after=FULL_STORE_RETRY_S)


def _wait_for_room(event, queue, message):
    deadline = time.monotonic() + queue.wait_ms / 1000
    pause = FIRST_POLL_S
    while (left := deadline - time.monotonic()) > 0:
        time.sleep(min(pause, left))
        pause = min(pause * 2, MAX_POLL_S)
        # The push records the idempotency key as it pushes; a call with the same key that got in first (it found
        # room, or its own wait pushed) leaves its outcome there, and this one publishes nothing.
        pushed = push(event, message)
        if pushed.outcome == wire.CEILING:
            raise QueueCeilingReached(f"queue {queue.name!r} is at its hard ceiling of {queue.ceiling} messages")
        if pushed.outcome in OUTCOMES:
            if not pushed.replayed:
                log_waited([event], LOG_ACCEPTED)
            return Published(OUTCOMES[pushed.outcome], pushed.replayed)
    _reject(event, queue)


def room_in(klass, queue, wanted=1):
    """(the queue's depth now, seconds until it has room for ``wanted`` more): from the drain rate the exporter last
    measured, or 1 s."""
    current = depth(klass, queue=queue)
    rate = drain_rate(queue.name)
    return current, max(1.0, round((current - queue.capacity + wanted) / rate + 0.5)) if rate else 1.0


def _reject(event, queue):
    klass = event.kind.klass
    # On a Redis Cluster the bound that was met is the user's partition's (its share of the class's capacity).
    queue = route(klass, event.user_id).queue
    current, retry_after = room_in(klass, queue)
    log_waited([event], LOG_REJECTED, f"{retry_after:g}")
    if count_rejection(klass, BURST_WINDOW_S, event.user_id):
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
