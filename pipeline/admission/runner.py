"""The one way in: admit an event, or a batch of one class's events, in one round trip to the class's Redis.

Every caller comes here (notify(), ingest, an inbox item's escalation): this module builds the event's message, the
kind's constants and the request (pipeline.admission.wire), runs admit_event.lua on the class's Redis (its Route,
resolved once per settings and process), hands a fold over to the digest's own Redis when the folds live there
(fold_handed.lua, a second round trip), and asks for a size-triggered flush when the fold store reached
SLUICE_DIGEST["max_keys"]. The caller is left only what it does with the answer: wait for room, refuse, or tell its
own caller.
"""

import json
import logging
import time
from contextlib import suppress
from functools import lru_cache
from typing import NamedTuple

from redis.exceptions import RedisError

from pipeline import durability
from pipeline.admission import wire
from pipeline.admission.event import batch_parts, batch_share, default_plan, key_ttl, message_of
from pipeline.admission.idempotency import record_key
from pipeline.admission.scripts import script
from pipeline.broker.beat_schedule import FLUSH_TASK
from pipeline.broker.message import body_head, tag_of
from pipeline.conf import queue_lists, sluice_settings
from pipeline.connections import route
from pipeline.errors import NotReplicated
from pipeline.metrics import fold_field
from pipeline.redis import keys
from pipeline.redis.cluster import partition_of

logger = logging.getLogger("sluice.admission")


def admit(event, queue=None, digest=None):
    """Admit ``event`` (pipeline.admission.event.Event) by its user's mirrored choices and its class's bounds; return
    its Admission (pipeline.admission.wire). One round trip to the class's Redis; two when it folds on the digest's own
    Redis. A replicated class WAITs for its replicas in each (pipeline.durability) and raises NotReplicated when they
    do not confirm in time. ``queue`` and ``digest`` (a QueueConfig, a resolved SLUICE_DIGEST) stand in for the
    class's own and the setting's: for tools and tests.

    An event with an idempotency key has its outcome recorded there in the same step, or gets the recorded one back
    (the reply's ``replayed``); an unknown user's (``event.unknown_user``) records only its key."""
    if event.unknown_user:
        return _unknown_user(event)
    found = route(event.kind.klass, event.user_id)
    request = _request(event, found, queue, digest)
    try:
        reply = durability.run(
            script.get("admit_event"),
            keys=request.keys,
            args=request.args,
            client=found.client,
            queue=request.queue,
            klass=found.klass,
            step="admission",
        )
    except NotReplicated as unconfirmed:
        _unconfirmed([event], [request], [unconfirmed.reply], [wire.decode_reply(unconfirmed.reply)], found)
        raise
    done = _decided(event, request, reply, found)
    if done.flush:
        ask_for_flush()
    return done


def admit_many(events, tally=""):
    """admit() for many events of one class: each decided exactly as admit() decides it, in order, in one round trip
    to the class's Redis per wire.MAX_BATCH events (admit_batch.lua, with one WAIT at its end for a replicated class);
    return their Admissions in order. The folds handed to the digest's own Redis take one more round trip a batch.
    An event whose user's mirror held no plan comes back as wire.ERROR, logged; the others are admitted. NotReplicated
    when the replicas did not confirm a batch: its events (and any before it) stay admitted on the primary.
    ``tally``, a counter field's prefix (pipeline.metrics.fanout_field), counts the events taken by their outcome in
    the same step."""
    done = [None] * len(events)
    for group in _by_partition(events):
        for start in range(0, len(group), wire.MAX_BATCH):
            batch = group[start : start + wire.MAX_BATCH]
            for (index, _event), admitted in zip(batch, _admit_batch([e for _i, e in batch], tally), strict=True):
                done[index] = admitted
    if any(each.flush for each in done):
        ask_for_flush()
    return done


def _by_partition(events):
    """``events`` as [(index, event)] groups, one per partition of their class (all of them, in order, on one Redis):
    a batch runs on one slot."""
    if not events:
        return []
    queue = sluice_settings().queues[events[0].kind.klass]
    if not queue.clustered:
        return [list(enumerate(events))]
    groups = {}
    for index, event in enumerate(events):
        groups.setdefault(partition_of(event.user_id, queue.partitions), []).append((index, event))
    return list(groups.values())


def _admit_batch(events, tally):
    if not events:
        return []
    klass = events[0].kind.klass
    if any(event.kind.klass != klass for event in events):
        raise ValueError(f"admit_many: a batch's events must be of one class ({klass}), got several")
    found = route(klass, events[0].user_id)
    batch_keys, batch_args, requests = _batch(events, found, tally)
    try:
        reply = durability.run(
            script.get("admit_batch"),
            keys=batch_keys,
            args=batch_args,
            client=found.client,
            queue=found.queue,
            klass=klass,
            step="admission",
        )
    except NotReplicated as unconfirmed:
        handed = wire.decode_batch_reply(unconfirmed.reply)
        _unconfirmed(events, requests, [wire.encode_reply(each) for each in handed], handed, found)
        raise
    admissions = wire.decode_batch_reply(reply)
    for event, done in zip(events, admissions, strict=True):
        if done.outcome == wire.ERROR:
            # A mirror the preferences never write (a bug, or a hand edit): the caller is told, the batch goes on.
            logger.error("admission: a %s event was not admitted: %s", event.kind.name, done.reason)
    return _handed_over(events, requests, admissions, found)


def _batch(events, found, tally=""):
    """admit_batch.lua's KEYS and ARGV for ``events`` (one class), and each event's _Request (for a handover)."""
    elsewhere, now = found.elsewhere, time.time()
    constants, payloads, shared_parts = {}, {}, {}
    event_keys, event_args, requests = [], [], []
    for event in events:
        kind = event.kind
        constant = request_constants(event, found)
        c_index = constants.setdefault(constant, len(constants) + 1)
        p_index = payloads.setdefault(event.payload_json, len(payloads) + 1)
        # Events alike but for their user share their message's parts: each sends only its head, id and tag.
        share = batch_share(event)
        if share not in shared_parts:
            shared_parts[share] = (len(shared_parts) + 1, json.dumps(batch_parts(event, found.queue.name, now)))
        m_index = shared_parts[share][0]
        notification = event.notification_id
        entity, by_kind, by_user = grains = keys.fold_members(event.user_id, kind.name, event.entity_id, kind.klass)
        idempotency = event.idempotency
        event_keys += (
            keys.preferences(event.user_id),
            keys.throttle(event.user_id, kind.name) if kind.throttle else keys.UNTHROTTLED,
            keys.ELSEWHERE if elsewhere else keys.fold(entity),
            keys.ELSEWHERE if elsewhere else keys.fold(by_kind),
            keys.ELSEWHERE if elsewhere else keys.fold(by_user),
            idempotency or keys.NO_IDEMPOTENCY,
        )
        event_args += (
            m_index,
            body_head(notification, event.user_id),
            tag_of(notification),
            c_index,
            p_index,
            event.entity_id,
            entity,
            by_kind,
            by_user,
            event.notification_id,
            key_ttl(event) if idempotency else 0,
            event.user_id,
            event.title,
        )
        requests.append(_Request(None, None, constant, grains, found.queue))
    shared = _store_keys(found.klass, elsewhere)
    batch_keys = [*(shared[name] for name in wire.BATCH_KEYS), *found.lists, *event_keys]
    counts = (len(found.lists), len(constants), len(payloads), len(shared_parts), tally)
    parts = [text for _index, text in shared_parts.values()]
    batch_args = [wire.BATCH_LAYOUT, *counts, *constants, *payloads, *parts, *event_args]
    return batch_keys, batch_args, requests


def _handed_over(events, requests, admissions, found):
    """``admissions`` with each fold admit_batch.lua handed over folded on the digest's Redis (one round trip)."""
    handed = [i for i, done in enumerate(admissions) if done.handover is not None]
    if not handed:
        return admissions
    admissions = list(admissions)
    for i in handed:
        # One fold_handed.lua each; a pipeline of them would be one round trip, at the cost of a second error path.
        admissions[i] = _hand_over(events[i], requests[i], wire.encode_reply(admissions[i]), admissions[i], found)
    return admissions


def ask_for_flush():
    """Ask for a flush now: the pending keys reached SLUICE_DIGEST['max_keys'] (admission set the flag). Published by
    the flush's task name, routed as beat's flush is."""
    from pipeline.celery import get_app

    get_app().send_task(FLUSH_TASK, kwargs={"trigger": "size"})


def _unknown_user(event):
    """What admission answers for an unknown user's event: ACCEPTED, its key recorded, or its recorded outcome."""
    ttl_s = key_ttl(event)
    recorded = record_key(event.kind.klass, event.idempotency, wire.ACCEPTED, ttl_s, event.user_id)
    return wire.Admission(recorded, replayed=True) if recorded else wire.Admission(wire.ACCEPTED)


class _Request(NamedTuple):
    """One event's admit_event.lua call: its KEYS and ARGV, and what a handover to the digest's Redis needs."""

    keys: list
    args: list
    constants: bytes
    grains: tuple
    queue: object


def request_constants(event, found, queue=None, digest=None):
    """The constants of ``event``'s kind as its admission's scripts read them (wire.kind_constants), kept on the
    class's route (one dictionary lookup on the hot path) unless ``queue`` or ``digest`` stand in for its own."""
    if queue is None and digest is None:
        cached = found.cache.get((event.kind.name, event.escalation))
        if cached is None:
            cached = found.cache[(event.kind.name, event.escalation)] = request_constants(event, found, found.queue)
        return cached
    digest = digest or sluice_settings().digest
    return wire.kind_constants(
        event.kind,
        queue or found.queue,
        default_plan(event.kind),
        digest.max_keys,
        digest.max_fold_keys,
        digest.max_fold_bytes,
        found.elsewhere,
        event.escalation,
        _activity_bound(),
    )


def _activity_bound():
    """The activity log's buffer bound for admission's constants: 0 while SLUICE_ACTIVITY is off."""
    conf = sluice_settings().activity
    return conf.buffer_entries if conf.enabled else 0


def _request(event, found, queue=None, digest=None):
    kind = event.kind
    idempotency = event.idempotency
    elsewhere = found.elsewhere
    entity, by_kind, by_user = keys.fold_members(event.user_id, kind.name, event.entity_id, kind.klass)
    constants = request_constants(event, found, queue, digest)
    queue = queue or found.queue
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
        *(found.lists if queue.name == found.queue.name else queue_lists(queue.name)),
    ]
    args = wire.request(
        wire.ADMIT_ARGS,
        layout=wire.ADMIT_LAYOUT,
        constants=constants,
        message=message_of(event, queue.name),
        payload=event.payload_json,
        member_entity=entity,
        member_kind=by_kind,
        member_user=by_user,
        entity=event.entity_id,
        notification=event.notification_id,
        idempotency_ttl=key_ttl(event) if idempotency else 0,
        user=event.user_id,
        title=event.title,
    )
    return _Request(request_keys, args, constants, (entity, by_kind, by_user), queue)


def _decided(event, request, reply, found):
    """The Admission of admit_event.lua's ``reply``, after the fold on the digest's Redis when it handed one over."""
    done = wire.decode_reply(reply)
    if done.handover is not None:
        return _hand_over(event, request, reply, done, found)
    return done


def _unconfirmed(events, requests, replies, admissions, found):
    """An admission its replicas did not confirm: the scripts ran on the primary and recorded their keys with the
    outcome the fold comes to, so each fold is handed over all the same, or a keyed retry would be told "folded" of
    an event folded nowhere. The caller is told the admission's NotReplicated (or a fold's own, which drops its key,
    as a refused fold does)."""
    for event, request, reply, handed in zip(events, requests, replies, admissions, strict=True):
        if handed.handover is not None:
            _hand_over(event, request, reply, handed, found)


def _hand_over(event, request, reply, handed, found):
    """Fold what admit_event.lua handed over on the digest's Redis; drop the recorded key if the fold was refused."""
    folded = _fold_handed(event, request, reply, handed, found)
    if event.idempotency and folded.outcome not in wire.RECORDED:
        _forget(found, event.idempotency)
    return folded


def _forget(found, idempotency):
    """Drop the outcome admit_event.lua recorded for a handover whose fold was refused, so a retry is decided anew.
    Only this path costs the round trip; if it fails, a retry within the TTL is told the fold's outcome."""
    try:
        found.client.delete(idempotency)
    except RedisError as exc:
        logger.warning("admission: an idempotency key of a refused fold could not be dropped (%s)", exc)


def _fold_handed(event, request, reply, handed, found):
    """The second round trip: fold what admit_event.lua handed over on the digest's Redis (fold_handed.lua). Its
    NotReplicated is the caller's, like admission's: the fold may be lost in a failover of the digest's Redis."""
    klass, idempotency = found.klass, event.idempotency
    entity, by_kind, by_user = request.grains
    try:
        folded = durability.run(
            script.get("fold_handed"),
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
                constants=request.constants,
                payload=event.payload_json,
                member_entity=entity,
                member_kind=by_kind,
                member_user=by_user,
                entity=event.entity_id,
                handed=reply,
            ),
            client=found.fold_client,
            queue=request.queue,
            klass=klass,
            step="fold",
        )
    except NotReplicated as exc:
        exc.sluice_redis_url = found.fold_url  # the caller names the digest's Redis, not the class's
        if idempotency:
            # The fold may be lost in a failover: the caller's retry folds again rather than being told "folded".
            _forget(found, idempotency)
        raise
    except RedisError as exc:
        if handed.outcome is None:
            # Nothing went out: the caller is told the Redis that failed (Unavailable) and sends again.
            exc.sluice_redis_url = found.fold_url
            if idempotency:
                _forget(found, idempotency)
            raise
        # The instant part is queued already; only its digest channels' copy is missed, counted as a fold the
        # store refused (as when the store is full), never silently.
        logger.warning("admission: the fold store's Redis failed (%s); one event's digest part is counted refused", exc)
        with suppress(RedisError):
            found.client.hincrby(keys.counters(), fold_field(klass, "refused"), 1)
        return wire.Admission(handed.outcome, False, handed.instant_channels)
    return wire.decode_reply(folded)


@lru_cache(maxsize=8)
def _store_keys(klass, elsewhere):
    """The fold store's keys, overflow and counters of a class (placeholders, never touched, folded elsewhere)."""
    store = (keys.ELSEWHERE,) * 3 if elsewhere else (keys.pending(), keys.fold_store_size(), keys.size_trigger())
    return dict(
        zip(("pending", "size", "trigger"), store, strict=True),
        counters=keys.counters(),
        overflow=keys.overflow(klass),
        activity=keys.activity(),
    )
