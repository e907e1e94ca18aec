"""The flush task: claim pending folds user by user, publish one digest per user and channel, exactly once; drain.

Each folding class keeps its folds on its own Redis (SLUICE_QUEUES[class]["redis_url"]), beside its queue, so a
user's digest messages are published and the claims of every key they cover released in one atomic step on one
Redis; or, with SLUICE_DIGEST["redis_url"], on the digest's own Redis, and then the messages go out on their class's
Redis with a handover mark before the claims are dropped (user_claims.publish_group_elsewhere), so a flusher that
dies in between is taken over without a second digest. A flush goes through every fold store in turn.
"""

import functools
import logging
import time
import uuid
from contextlib import contextmanager

from redis.exceptions import RedisError

from digest import fold_store, grouping, user_claims
from digest.fold_store import script
from pipeline import activity_fields, housekeeping, metrics
from pipeline.broker.beat_schedule import FLUSH_TASK
from pipeline.broker.depth import depth
from pipeline.broker.message import event_kwargs_json, send_message
from pipeline.celery import task
from pipeline.conf import CLASSES, queue_lists, sluice_settings
from pipeline.connections import class_redis, client_of, fold_store_classes, folds_elsewhere, get_redis, route
from pipeline.errors import NotReplicated
from pipeline.redis import keys

from .signals import flush_started

logger = logging.getLogger("sluice.digest")

DRAIN_TASK = "sluice.overflow.drain"
BATCH = 500
# Longer than a flush of one batch takes; after it, another flusher takes a dead one's claim over.
LEASE_S = 60
DRAIN_LIMIT = 1000


@task(name=FLUSH_TASK, ignore_result=True)
def flush(trigger="beat"):
    """Publish the pending folds in one digest per user and channel (digest.grouping), a step within its budget per
    fold store (the drain task finishes what it left); return how many messages were published."""
    try:
        return run_flush(trigger, budget_s=housekeeping.STEP_BUDGET_S)
    finally:
        for client in _stores():
            # Free the trigger once the flush got the pending keys below the threshold. If full queues kept
            # them there, the flag expires by itself (SIZE_TRIGGER_TTL_S), so a burst does not turn every
            # fold into another flush that finds no room.
            with _each_store(client):
                if trigger == "size" and client.zcard(keys.pending()) < sluice_settings().digest.max_keys:
                    client.delete(keys.size_trigger())


@task(name=DRAIN_TASK, ignore_result=True)
def drain():
    """Every few seconds: move opted-out users' messages into their queues while there is room, and
    finish a flush that full queues cut short, so its digests go out as soon as room frees."""
    backlog = False
    for client in _stores():
        with _each_store(client):
            backlog = backlog or bool(client.exists(keys.flush_backlog()))
    if backlog:
        return run_flush("backlog", budget_s=housekeeping.STEP_BUDGET_S)
    return drain_overflows()


@contextmanager
def _each_store(client):
    """One fold store's Redis being away stops that store's work only, never the other stores' (a Redis per
    class isolates them); what it missed, the next flush or drain does."""
    try:
        yield
    except RedisError as exc:
        logger.warning("digest: the Redis at %s is unavailable, the other stores go on: %s", _where(client), exc)


def _where(client):
    kwargs = client.connection_pool.connection_kwargs
    return kwargs.get("path") or f"{kwargs.get('host')}:{kwargs.get('port')}"


def _stores():
    """One client per fold store: each Redis that routine or background keeps its folds on."""
    return [get_redis(url) for url in fold_store_classes()]


def run_flush(trigger, batch=None, lease_s=LEASE_S, budget_s=None):
    """Flush every fold store: recover dead claims, then claim and publish in batches until pending is empty, a
    queue is full or the store's step has spent ``budget_s`` (what is left is the drain task's, as a backlog); then
    drain the overflows. Return how many digests were published.

    With ``budget_s``, each store's step runs under the flush's lease there (pipeline.housekeeping): a store whose
    flush runs elsewhere is skipped. Without it (tools, tests), every store is flushed to the end, unleased."""
    for receiver, outcome in flush_started.send_robust(sender=run_flush, trigger=trigger):
        if isinstance(outcome, Exception):
            # A receiver's failure (a database outage while the preferences rebuild their mirror) must not
            # stop digests from going out: saves keep the mirror current, the rebuild only heals drift.
            logger.warning("flush: %s failed: %s", getattr(receiver, "__name__", receiver), type(outcome).__name__)
    published = 0
    full = set()
    stores = fold_store_classes()
    for index, (url, classes) in enumerate(stores.items()):
        client = get_redis(url)
        with _each_store(client), _store_step(client, classes, budget_s) as step:
            if step is None:
                continue  # this store's flush runs in another worker: it publishes what is due
            # One flush counts once (sluice_digest_flushes_total), on the first store, however many stores it
            # went through.
            counted = index == 0
            published += _flush_store(client, classes, trigger, batch or BATCH, lease_s, full, counted, step)
    drained = drain_overflows()
    # One line a flush, even an empty one: at INFO, a worker's log shows beat's flush is running.
    logger.info("flush (%s): %d digest messages published, %d overflow messages moved", trigger, published, drained)
    return published


@contextmanager
def _store_step(client, classes, budget_s):
    """The flush's step on one fold store: leased and within ``budget_s``, or unbounded without one."""
    if budget_s is None:
        yield housekeeping.unbounded()
        return
    with housekeeping.step(FLUSH_TASK, "+".join(classes), client, budget_s) as step:
        yield step


def _flush_store(client, classes, trigger, batch, lease_s, full, counted=True, step=None):
    """Flush the fold store on ``client`` (holding ``classes``' folds and queues) until done, full, or ``step`` (a
    pipeline.housekeeping.Step) is over; return digests published."""
    step = step or housekeeping.unbounded()
    published = 0
    for stale in fold_store.expired_claims(client):
        fold_store.renew(stale, lease_s, client)
        logger.warning("taking over flush %s, whose flusher died or stalled", stale)
        published += _publish(stale, fold_store.claimed_members(stale, client), full, client, classes)
    exhausted = False
    # Each class claims no more of its keys than its own queue has room for, measured again before each batch:
    # a flusher that dies holding a claim holds at most that (and one user's keys past it), never the other
    # classes' room too.
    # At least one batch a step, however small its budget: every step makes progress.
    while any((rooms := _rooms(classes, full)).values()):
        # One claim id per batch: a key folded again after its digest went out is claimed anew, under
        # a new id, so its next digest never shares a notification id (and a dedup) with the last.
        claim_id = uuid.uuid4().hex
        # Whole users, so each user's keys of a class go out in one digest per channel.
        members = user_claims.claim_users(claim_id, sum(rooms.values()), batch, lease_s, client, rooms)
        if not members:
            # Nothing left to claim, unless due keys of a class without room wait staged for it.
            exhausted = not members.left
            break
        published += _publish(claim_id, members, full, client, classes)
        if step.over():
            break
    pipe = client.pipeline(transaction=False)
    if exhausted:
        pipe.delete(keys.flush_backlog())
    else:
        # Full queues, or the step's budget, stopped this flush before its keys ran out: the drain task (every few
        # seconds) finishes it, a step at a time, rather than leaving the digests to the next interval.
        pipe.set(keys.flush_backlog(), time.time(), ex=3600)
        step.more = True
    now = time.time()
    stats = {"last_flush_at": now, "last_flush_size": published, metrics.last_flush_field(trigger): now}
    pipe.hset(keys.digest_stats(), mapping=stats)
    if counted:
        pipe.hincrby(keys.counters(), "digest:flushes", 1)
    pipe.execute()
    return published


def _rooms(classes, full):
    """{class: its room} for the classes of one store, in the store's order; none for a class found full."""
    return {klass: 0 if klass in full else _room(klass) for klass in classes}


def _room(klass):
    """Free slots of a class's queue, on its Redis: a flush claims no more of its keys than could be published
    now."""
    return max(0, sluice_settings().queues[klass].capacity - depth(klass))


def _publish(flush_id, members, full, client, classes):
    """Publish the claimed folds of ``members`` from the store on ``client``, one user group at a time (each user's
    messages and the release of every key they cover in one step); a group whose queue is full goes back to pending.
    Return how many messages were published."""
    conf = sluice_settings()
    published = 0
    handed_to = {}

    class_of = functools.partial(grouping.class_of, conf=conf, classes=classes)
    # Newest groups first: each goes to the end workers take from, so the oldest ends up taken first.
    for group in grouping.group_folds(fold_store.read_claimed(flush_id, members, client), class_of):
        klass = group.klass
        if klass in full:
            _unclaim(flush_id, group.members, client)
            continue
        queue = conf.queues[klass]
        single = functools.partial(_message, flush_id, klass=klass, queue_name=queue.name, conf=conf)
        for step in grouping.steps_of(flush_id, group, queue.name, conf, single):
            if klass in full:
                _unclaim(flush_id, step.members, client)
                continue
            published += _publish_step(flush_id, step, group, queue, full, client, handed_to)
    fold_store.release(flush_id, client, handed_to.values())
    return published


def _publish_step(flush_id, step, group, queue, full, client, handed_to):
    """Publish one step's messages (of ``group``'s user) with the release of its keys; return how many messages went
    out. On a Redis Cluster they go to the user's partition, within its share of the class's capacity."""
    klass = group.klass
    events = sum(o.events for o in step.outgoing)
    counters = (
        metrics.digest_published_field(klass),
        metrics.digest_messages_field(klass),
        metrics.digest_events_field(klass),
        events,
    )
    messages = [o.message for o in step.outgoing]
    if folds_elsewhere(klass):
        found = route(klass, group.user_id)
        target = handed_to.setdefault((klass, found.queue.tag), found.client)
        try:
            code = user_claims.publish_group_elsewhere(
                flush_id, step, found.queue, messages, counters, client, target, klass
            )
        except NotReplicated as exc:
            # Out on the class's primary, unconfirmed: its claims stay, as below, until the replicas catch up or a
            # takeover finds the handover mark (or, after a failover that lost it, publishes the step again).
            metrics.count_unconfirmed(exc)
            logger.warning(
                "digest: a handover of a %s digest is unconfirmed by replicas, the class waits: %s", klass, exc
            )
            full.add(klass)
            return 0
        except RedisError as exc:
            # Whether this step went out is unknown: its claims stay, and whoever takes them over once the lease
            # runs out finds the handover mark, or publishes it. The class's other steps wait.
            logger.warning("digest: a handover of a %s digest failed, the class's digests wait: %s", klass, exc)
            full.add(klass)
            return 0
    else:
        code = user_claims.publish_group(flush_id, step, queue, messages, counters, client)
    if code == 0:
        # Backpressure: the queue has no room for the step's messages, so they and the class's later steps wait.
        full.add(klass)
        _unclaim(flush_id, step.members, client)
    if code == 1:
        _log_listed(klass, step)
    return len(messages) if code == 1 else 0


def _log_listed(klass, step):
    """Write each published digest message's entry (which fold keys it carried) to the class's activity log: one
    pipelined round trip a step, on the flush's own path. Never raises: the step went out."""
    log = sluice_settings().activity
    logged = [o.activity for o in step.outgoing if o.activity is not None]
    if not log.enabled or not logged:
        return
    try:
        pipe = class_redis(klass).pipeline(transaction=False)
        for entry in logged:
            activity_fields.add(pipe, entry, log.buffer_entries)
        pipe.execute()
    except RedisError as exc:
        logger.warning("digest: the activity entries of a %s step were not written: %s", klass, type(exc).__name__)


def _unclaim(flush_id, members, client):
    for member in members:
        fold_store.unclaim(flush_id, member, client)


def _message(flush_id, fold, *, klass, queue_name, conf, channels=None):
    """A fold's own digest message (one per fold key), rendered with its kind's digest template; on ``channels``
    only when given (its inboxes, when its other channels list it in the user's digest: digest.grouping)."""
    kind = conf.kinds.get(fold.kind)
    kind_channels = kind.channels if kind else ()
    notification_id = fold.notification_id(flush_id)
    extra = {"count": fold.count, "first_seen": fold.first_seen, "last_seen": fold.last_seen}
    channels = channels or fold.channels
    if channels and set(channels) != set(kind_channels):
        extra["channels"] = list(channels)  # the channels its events asked for (a user's choices), or its inboxes
    if fold.grain != "entity":
        # Up to 100 distinct entities are remembered; past that the count reads "100+".
        extra.update(grain=fold.grain, entities=fold.entities if fold.entities <= 100 else "100+", kinds=fold.kinds)
    kwargs = event_kwargs_json(
        notification_id, fold.kind, fold.user_id, fold.entity_id or "", fold.payload_json, **extra
    )
    # Published when its first event happened: queue latency then reads how long its events have waited.
    return send_message(klass, notification_id, kwargs, queue_name, fold.kind, fold.count, published_at=fold.first_seen)


def drain_overflows():
    """Move waiting overflow messages into each class queue while it has room; return how many moved."""
    queues = sluice_settings().queues
    moved = 0
    for klass in CLASSES:
        # On a Redis Cluster each partition keeps the overflow of its own users, within its own share.
        for queue in queues[klass].every_partition:
            client = client_of(queue)
            with _each_store(client):
                moved += script("drain_overflow", on=client)(
                    keys=[keys.overflow(klass), queue.name, *queue_lists(queue.name)[1:]],
                    args=[queue.capacity, DRAIN_LIMIT],
                )
    return moved
