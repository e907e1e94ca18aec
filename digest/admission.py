"""Run admission's Lua for one event, or a batch: admit_event.lua on the class's Redis, then fold_handed.lua on the
digest's."""

import logging
from contextlib import suppress
from functools import lru_cache
from typing import NamedTuple

from redis.exceptions import RedisError

from digest.fold_store import fold_redis, members, script
from pipeline import durability
from pipeline.connections import class_redis, fold_store_url, folds_elsewhere
from pipeline.errors import NotReplicated
from pipeline.metrics import fold_field
from pipeline.redis import keys

from . import admission_wire as wire

logger = logging.getLogger("sluice.digest")


def admit_event(
    event, queue, message, plan, digest, notification_id, client=None, escalation=None, idempotency_ttl_s=0
):
    """Run admit_event.lua for ``event`` (a policy.Event) on its class's Redis (or ``client``): preferences, holds,
    the queue's bound, the fold store's; return its Admission (admission_wire). A class whose folds live on its own
    Redis decides in one round trip; with SLUICE_DIGEST["redis_url"] elsewhere, an event to fold takes a second,
    fold_handed.lua on that Redis. A replicated class WAITs for its replicas in each of those round trips
    (pipeline.durability) and raises NotReplicated when they do not confirm in time.

    ``plan`` is the kind's default plan (admission_wire.encode_plan); ``message`` carries
    admission_wire.CHANNELS_PLACEHOLDER where the channels header goes; ``digest`` is the resolved SLUICE_DIGEST;
    ``escalation`` (a tuple of channels) makes the event an inbox item's escalation on those channels; it is
    admitted once by its idempotency key.
    An event with an idempotency key (``event.idempotency``, a key name) has its outcome recorded there for
    ``idempotency_ttl_s`` seconds in the same step, or gets the recorded one back (the reply's ``replayed``).
    """
    kind = event.kind
    elsewhere = client is None and folds_elsewhere(kind.klass)
    request = _request(event, queue, message, plan, digest, notification_id, elsewhere, escalation, idempotency_ttl_s)
    try:
        reply = durability.run(
            script("admit_event"),
            keys=request.keys,
            args=request.args,
            client=client or class_redis(kind.klass),
            queue=queue,
            klass=kind.klass,
            step="admission",
        )
    except NotReplicated as unconfirmed:
        _unconfirmed([event], [request], [unconfirmed.reply])
        raise
    return _decided(event, queue, request, reply)


def admit_events(events, queue, digest, escalation=None, idempotency_ttl_s=0):
    """admit_event() for many events of one class, (event, message, plan) each, in one round trip to the class's
    Redis (a pipeline, with one WAIT at its end for a replicated class); return their Admissions in order. A fold
    on the digest's own Redis still takes its own second round trip. NotReplicated when the replicas did not
    confirm: every event of the batch is then unconfirmed (its admission stays on the primary)."""
    if not events:
        return []
    klass = events[0][0].kind.klass
    elsewhere = folds_elsewhere(klass)
    requests = [
        _request(event, queue, message, plan, digest, event.notification_id, elsewhere, escalation, idempotency_ttl_s)
        for event, message, plan in events
    ]
    try:
        replies = durability.run_many(
            script("admit_event"),
            [(request.keys, request.args) for request in requests],
            client=class_redis(klass),
            queue=queue,
            klass=klass,
            step="admission",
        )
    except NotReplicated as unconfirmed:
        _unconfirmed([event for event, _message, _plan in events], requests, unconfirmed.reply)
        raise
    return [
        _decided(event, queue, request, reply)
        for (event, _message, _plan), request, reply in zip(events, requests, replies, strict=True)
    ]


class _Request(NamedTuple):
    """One event's admit_event.lua call: its KEYS and ARGV, and what a handover to the digest's Redis needs."""

    keys: list
    args: list
    constants: bytes
    grains: tuple
    queue: object


def _request(event, queue, message, plan, digest, notification_id, elsewhere, escalation, idempotency_ttl_s):
    kind = event.kind
    idempotency = event.idempotency
    entity, by_kind, by_user = members(event.user_id, kind.name, event.entity_id, kind.klass)
    constants = wire.kind_constants(
        kind,
        queue,
        plan,
        digest["max_keys"],
        digest["max_fold_keys"],
        digest["max_fold_bytes"],
        elsewhere,
        tuple(escalation) if escalation else None,
    )
    request_keys = [
        *wire.request(
            wire.ADMIT_KEYS,
            **_store_keys(kind.klass, elsewhere),
            preferences=keys.preferences(event.user_id),
            throttle=keys.throttle(event.user_id, kind.name) if kind.throttle else keys.UNTHROTTLED,
            # Folded elsewhere: the class's Redis is never even handed a fold's key.
            fold_entity=keys.ELSEWHERE if elsewhere else keys.fold(entity),
            fold_kind=keys.ELSEWHERE if elsewhere else keys.fold(by_kind),
            fold_user=keys.ELSEWHERE if elsewhere else keys.fold(by_user),
            idempotency=idempotency or keys.NO_IDEMPOTENCY,
        ),
        *_queue_keys(queue.name),
    ]
    args = wire.request(
        wire.ADMIT_ARGS,
        layout=wire.ADMIT_LAYOUT,
        constants=constants,
        message=message,
        payload=event.payload_json,
        member_entity=entity,
        member_kind=by_kind,
        member_user=by_user,
        entity=event.entity_id,
        notification=notification_id,
        idempotency_ttl=idempotency_ttl_s if idempotency else 0,
    )
    return _Request(request_keys, args, constants, (entity, by_kind, by_user), queue)


def _decided(event, queue, request, reply):
    """The Admission of admit_event.lua's ``reply``, after the fold on the digest's Redis when it handed one over."""
    done = wire.decode_reply(reply)
    if done.handover is not None:
        return _hand_over(event, queue, request.constants, request.grains, reply, done, event.idempotency)
    return done


def _unconfirmed(events, requests, replies):
    """An admission its replicas did not confirm: the scripts ran on the primary and recorded their keys with the
    outcome the fold comes to, so each fold is handed over all the same, or a keyed retry would be told "folded" of
    an event folded nowhere. The caller is told the admission's NotReplicated (or a fold's own, which drops its key,
    as a refused fold does)."""
    for event, request, reply in zip(events, requests, replies, strict=True):
        handed = wire.decode_reply(reply)
        if handed.handover is not None:
            _hand_over(event, request.queue, request.constants, request.grains, reply, handed, event.idempotency)


def _hand_over(event, queue, constants, grains, reply, handed, idempotency):
    """Fold what admit_event.lua handed over on the digest's Redis; drop the recorded key if the fold was refused."""
    folded = _fold_handed(event, queue, constants, grains, reply, handed, idempotency)
    if idempotency and folded.outcome not in wire.RECORDED:
        _forget(event.kind.klass, idempotency)
    return folded


def _forget(klass, idempotency):
    """Drop the outcome admit_event.lua recorded for a handover whose fold was refused, so a retry is decided anew.
    Only this path costs the round trip; if it fails, a retry within the TTL is told the fold's outcome."""
    try:
        class_redis(klass).delete(idempotency)
    except RedisError as exc:
        logger.warning("digest: an idempotency key of a refused fold could not be dropped (%s)", exc)


def _fold_handed(event, queue, constants, grains, reply, handed, idempotency=None):
    """The second round trip: fold what admit_event.lua handed over on the digest's Redis (fold_handed.lua). Its
    NotReplicated is the caller's, like admission's: the fold may be lost in a failover of the digest's Redis."""
    klass = event.kind.klass
    entity, by_kind, by_user = grains
    try:
        folded = durability.run(
            script("fold_handed"),
            keys=wire.request(
                wire.FOLD_KEYS,
                counters=keys.counters(),
                pending=keys.pending(),
                size=keys.fold_store_size(),
                trigger=keys.size_trigger(),
                fold_entity=keys.fold(entity),
                fold_kind=keys.fold(by_kind),
                fold_user=keys.fold(by_user),
            ),
            args=wire.request(
                wire.FOLD_ARGS,
                layout=wire.FOLD_LAYOUT,
                constants=constants,
                payload=event.payload_json,
                member_entity=entity,
                member_kind=by_kind,
                member_user=by_user,
                entity=event.entity_id,
                handed=reply,
            ),
            client=fold_redis(klass),
            queue=queue,
            klass=klass,
            step="fold",
        )
    except NotReplicated as exc:
        exc.sluice_redis_url = fold_store_url(klass)  # the caller names the digest's Redis, not the class's
        if idempotency:
            # The fold may be lost in a failover: the caller's retry folds again rather than being told "folded".
            _forget(klass, idempotency)
        raise
    except RedisError as exc:
        if handed.outcome is None:
            # Nothing went out: the caller is told the Redis that failed (Unavailable) and sends again.
            exc.sluice_redis_url = fold_store_url(klass)
            if idempotency:
                _forget(klass, idempotency)
            raise
        # The instant part is queued already; only its digest channels' copy is missed, counted as a fold the
        # store refused (as when the store is full), never silently.
        logger.warning("digest: the fold store's Redis failed (%s); one event's digest part is counted refused", exc)
        with suppress(RedisError):
            class_redis(klass).hincrby(keys.counters(), fold_field(klass, "refused"), 1)
        return wire.Admission(handed.outcome, False, handed.instant_channels)
    return wire.decode_reply(folded)


@lru_cache(maxsize=8)
def _store_keys(klass, elsewhere):
    """The fold store's keys, overflow and counters of a class (placeholders, never touched, folded elsewhere)."""
    store = (keys.ELSEWHERE,) * 3 if elsewhere else (keys.pending(), keys.fold_store_size(), keys.size_trigger())
    return dict(
        zip(("pending", "size", "trigger"), store, strict=True), counters=keys.counters(), overflow=keys.overflow(klass)
    )


@lru_cache(maxsize=16)
def _queue_keys(queue_name):
    return tuple(keys.priority_lists(queue_name))
