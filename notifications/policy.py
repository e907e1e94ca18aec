"""The class policy: publish a validated event, and decide what its class does when the queue is full.

What the user chose comes first (a channel off, the digest, quiet hours, a cadence, a throttle), then the
class: critical waits up to wait_ms for room, then raises Rejected; routine folds into the digest (or, for a
user who chose instant delivery, waits in the overflow); background collapses to its latest state. All of it
is decided in one Redis round trip (digest/lua/admit_event.lua), from the preferences mirrored into Redis.
"""

import logging
import time
from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple

from kombu.exceptions import OperationalError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import OutOfMemoryError, ReadOnlyError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from digest import admission_wire as wire
from digest.admission import admit_event
from digest.flush import enqueue_size_flush
from pipeline.bounded_push import PUSHED, count_rejection, opens_burst, push
from pipeline.conf import sluice_settings
from pipeline.conf_kinds import Kind
from pipeline.depth import depth, drain_rate
from pipeline.errors import NotReplicated, WaitRefused
from pipeline.idempotency import record_key
from pipeline.message import event_kwargs_json, send_message
from pipeline.metrics import count_unconfirmed
from pipeline.redis.addresses import describe

from .exceptions import QueueCeilingReached, Rejected, Unavailable
from .outcome import Outcome

logger = logging.getLogger("sluice.admission")

# Polling for room backs off from 2 ms to 25 ms: about a dozen tries in 250 ms, never a spin.
FIRST_POLL_S, MAX_POLL_S = 0.002, 0.025
BURST_WINDOW_S = 10
# A full fold store drains at the next flushes (every flush_interval_s); a refused caller comes back then.
FULL_STORE_RETRY_S = 60.0
# Redis's answer to a write on a primary with fewer good replicas than min-replicas-to-write (redis-py has no
# class of its own for it).
NO_REPLICAS = "NOREPLICAS"


@dataclass(frozen=True, slots=True)
class Event:
    """A validated event, ready to publish."""

    kind: Kind
    notification_id: str
    user_id: object
    entity_id: str
    payload_json: str
    # The caller's idempotency key as its Redis key (pipeline.redis.keys.idempotency: scoped and hashed), or None.
    idempotency: str | None = None
    # A user id that does not exist, from a caller who may not learn so (ingest without reveal): nothing is published,
    # and the key is recorded and replayed as a real event's (notifications.api.answer_unknown_user).
    unknown_user: bool = False


class Published(NamedTuple):
    """What publishing one event came to: its Outcome, and whether that is a recorded one replayed (the event's
    idempotency key had been seen within SLUICE_IDEMPOTENCY_TTL_S; nothing was published this time)."""

    outcome: Outcome
    replayed: bool = False


def event_message(event, queue_name, channels_header):
    """The Celery message that sends ``event``; ``channels_header`` (JSON) restricts its channels."""
    kind = event.kind
    # A kind that expires carries its deadline in the message, so retries and replays keep the event's own.
    extra = {"expires_at": round(time.time() + kind.expires_after_s, 3)} if kind.expires_after_s else {}
    kwargs = event_kwargs_json(
        event.notification_id, kind.name, event.user_id, event.entity_id, event.payload_json, **extra
    )
    return send_message(
        kind.klass, event.notification_id, kwargs, queue_name, kind.name, channels_header=channels_header
    )


@lru_cache(maxsize=64)
def default_plan(kind):
    """What admission does for a user who chose nothing (admission_wire.encode_plan); cached: the hot path."""
    instant = kind.default_mode == "instant"
    return wire.encode_plan(kind.channels if instant else (), () if instant else kind.channels, False)


def publish_event(event):
    """Admit ``event``; return its Outcome, or raise Rejected or Unavailable."""
    return publish(event).outcome


def publish(event):
    """Admit ``event``; return its Published (the Outcome, and whether it was replayed), or raise Rejected or
    Unavailable."""
    queue = sluice_settings().queues[event.kind.klass]
    try:
        return decide(event, queue)
    except WaitRefused as exc:
        # Not an outage but a setting (logged once per process by pipeline.durability): the same refusal comes back
        # until the ACL user may run WAIT. A retry with the same idempotency key is then answered, not sent again.
        count_unconfirmed(exc)
        raise Unavailable(
            f"Redis at {_where(event.kind.klass, exc)} refused WAIT ({exc.reason}): the {exc.step} may be on the "
            "primary but is not confirmed by its replicas; its user needs +wait (docs/redis.md); retry"
        ) from exc
    except NotReplicated as exc:
        # A replicated class: admitted on the primary, maybe, but not confirmed durable; a failover could lose it.
        count_unconfirmed(exc)
        where = _where(event.kind.klass, exc)
        raise Unavailable(
            f"Redis at {where}: the {exc.step} was not confirmed by {exc.replicas} replica(s) within {exc.timeout_ms} "
            f"ms ({exc.confirmed} confirmed); it may be on the primary but is not durable; retry"
        ) from exc
    except OutOfMemoryError as exc:
        # Redis at its maxmemory under noeviction: full, not broken; the caller retries later (ingest: 503).
        raise Unavailable(f"Redis at {_where(event.kind.klass, exc)} is out of memory; retry later") from exc
    except (RedisConnectionError, RedisTimeoutError, OperationalError, ReadOnlyError) as exc:
        # ReadOnlyError: a replica (a primary demoted by a failover, before the client asked the sentinels again).
        where = _where(event.kind.klass, exc)
        raise Unavailable(f"Redis at {where} is unavailable ({type(exc).__name__}: {exc}); retry later") from exc
    except ResponseError as exc:
        if not str(exc).startswith(NO_REPLICAS):
            raise
        # A primary that lost its replicas (min-replicas-to-write): it refuses writes that a failover could lose.
        where = _where(event.kind.klass, exc)
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
    """Decide one validated event's fate by its user's choices and its class (digest/lua/admit_event.lua: one
    round trip, two when it folds on the digest's own Redis); return its Published or raise Rejected. An event
    whose idempotency key is recorded gets the recorded outcome back from that same round trip."""
    conf = sluice_settings()
    if event.unknown_user:
        recorded = record_key(event.kind.klass, event.idempotency, wire.ACCEPTED, conf.idempotency_ttl_s)
        return Published(OUTCOMES[recorded], replayed=True) if recorded else Published(Outcome.ACCEPTED)
    message = event_message(event, queue.name, wire.CHANNELS_PLACEHOLDER)
    done = admit_event(
        event,
        queue,
        message,
        default_plan(event.kind),
        conf.digest,
        event.notification_id,
        idempotency_ttl_s=conf.idempotency_ttl_s,
    )
    if done.flush:
        enqueue_size_flush()
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
    ttl_s = sluice_settings().idempotency_ttl_s
    while (left := deadline - time.monotonic()) > 0:
        time.sleep(min(pause, left))
        pause = min(pause * 2, MAX_POLL_S)
        # The push records the idempotency key as it pushes; a call with the same key that got in first (it found
        # room, or its own wait pushed) leaves its outcome there, and this one publishes nothing.
        pushed = push(queue, message, "critical", event.idempotency, ttl_s)
        if pushed == PUSHED:
            return Published(Outcome.ACCEPTED)
        if isinstance(pushed, str):
            return Published(OUTCOMES[pushed], replayed=True)
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
