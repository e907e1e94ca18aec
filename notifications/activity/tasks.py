"""The activity log's periodic tasks, run by Sluice's beat: drain each Redis's buffer into the database, and prune
past the retention, in bounded steps under leases.

The drain reads each buffer (a capped stream, pipeline.activity_fields) in batches from the last id it stored (kept in
Redis beside the stream), stores them with bulk_create (a batch drained twice, after a drain killed between its
insert and its bookkeeping, is stored once: each row's source is unique), then in one MULTI records the batch and
trims it from the stream. What the stream's bound trimmed before the drain got to it is the dropped count the
exporter reports (sluice_activity_dropped_total).
"""

import logging
from datetime import UTC, datetime, timedelta

from django.contrib.auth import get_user_model
from django.utils import timezone

from pipeline import activity_fields, housekeeping, metrics
from pipeline.broker.queues import queue_for_class
from pipeline.celery import task
from pipeline.conf import sluice_settings
from pipeline.connections import class_redis, classes_by_redis
from pipeline.redis import keys

from .models import ActivityEntry

logger = logging.getLogger("sluice.activity")

DRAIN_TASK = "sluice.activity.drain"
PRUNE_TASK = "sluice.activity.prune"
#: Entries read, and rows inserted, at once: one XRANGE and one INSERT.
DRAIN_BATCH = 1000
PRUNE_BATCH = 1000
# Both run where unrouted tasks go: the background pool, never in a critical send's slot.
QUEUE_SCOPE = "background"


@task(name=DRAIN_TASK, ignore_result=True)
def drain():
    """Drain every Redis's activity buffer into the database, each within a step's budget under its lease (scope:
    the first class on that Redis); ask for the next step while entries are left. Return how many were drained."""
    total, more = 0, False
    for client, classes in classes_by_redis():
        # A partition of a class on a Redis Cluster is a buffer of its own, whose stream ids another partition's
        # may repeat: its tag is part of the scope, and so of each row's source.
        scope = classes[0] + getattr(client, "tag", "")
        with housekeeping.step(DRAIN_TASK, scope, client) as step:
            if step is None:
                continue  # another step drains this Redis
            total += drain_buffer(client, scope, step)
        more = more or step.more
    if more:
        housekeeping.again(drain, QUEUE_SCOPE, class_redis(QUEUE_SCOPE), queue=queue_for_class(QUEUE_SCOPE))
    return total


def drain_buffer(client, scope, step):
    """Store the entries of the buffer on ``client`` in batches of DRAIN_BATCH until it is empty or ``step`` is over
    (``step.more`` then); return how many were drained."""
    total = 0
    while True:
        last = client.hget(keys.activity_drained(), activity_fields.DRAINED_LAST)
        start = f"({last.decode()}" if last else "-"
        batch = client.xrange(keys.activity(), min=start, count=DRAIN_BATCH)
        if not batch:
            return total
        store(batch, scope)
        newest = batch[-1][0].decode()
        pipe = client.pipeline(transaction=True)
        pipe.hset(keys.activity_drained(), activity_fields.DRAINED_LAST, newest)
        pipe.hincrby(keys.activity_drained(), activity_fields.DRAINED_COUNT, len(batch))
        pipe.xtrim(keys.activity(), minid=_after(newest), approximate=False)
        pipe.execute()
        total += len(batch)
        metrics.count(metrics.ACTIVITY_DRAINED, len(batch))
        if len(batch) < DRAIN_BATCH:
            return total
        if step.over():
            step.more = True
            return total


def _after(stream_id):
    """The stream id right after ``stream_id``: XTRIM MINID keeps it and everything newer."""
    ms, seq = stream_id.split("-")
    return f"{ms}-{int(seq) + 1}"


def store(batch, scope):
    """Insert a batch of stream entries [(id, fields)] as rows; an entry whose user is gone is skipped (their log went
    with them); a row stored already (its source) is left as it is. Return how many rows were offered."""
    pk = get_user_model()._meta.pk
    decoded = []
    for stream_id, fields in batch:
        entry = activity_fields.decode(fields)
        try:
            user_id = pk.to_python(entry.user)
        except Exception:  # noqa: BLE001 - an id that is no user's pk belongs to no one's log
            continue
        decoded.append((stream_id.decode(), entry, user_id))
    present = set(get_user_model().objects.filter(pk__in={u for _s, _e, u in decoded}).values_list("pk", flat=True))
    rows = [_row(stream_id, entry, user_id, scope) for stream_id, entry, user_id in decoded if user_id in present]
    return len(ActivityEntry.objects.bulk_create(rows, ignore_conflicts=True))


def _row(stream_id, entry, user_id, scope):
    at = datetime.fromtimestamp(activity_fields.stream_time(stream_id), tz=UTC)
    return ActivityEntry(
        user_id=user_id,
        kind=entry.kind[:100],
        entity_id=entry.entity[:500],
        notification_id=entry.notification[:100],
        klass=entry.klass[:20],
        outcome=entry.outcome[:20],
        reason=entry.reason[:100],
        detail=entry.detail,
        fold_key=entry.fold,
        title=entry.title[:200],
        channel=entry.channel[:100],
        provider=entry.provider[:100],
        at=at,
        source=f"{scope}:{stream_id}",
    )


@task(name=PRUNE_TASK, ignore_result=True)
def prune():
    """Delete the entries older than SLUICE_ACTIVITY["retention_days"], in batches, within a step's budget (the next
    step asked for while old ones are left); return how many went."""
    client = class_redis(QUEUE_SCOPE)
    with housekeeping.step(PRUNE_TASK, QUEUE_SCOPE, client) as step:
        if step is None:
            return 0
        total = prune_rows(step)
    if step.more:
        housekeeping.again(prune, QUEUE_SCOPE, client, queue=queue_for_class(QUEUE_SCOPE))
    return total


def prune_rows(step):
    """Delete old entries PRUNE_BATCH at a time until none is left or ``step`` is over; return how many went."""
    cutoff = timezone.now() - timedelta(days=sluice_settings().activity.retention_days)
    total = housekeeping.delete_in_batches(ActivityEntry.objects.filter(at__lt=cutoff), step, PRUNE_BATCH)
    if total:
        metrics.count(metrics.ACTIVITY_PRUNED, total)
        logger.info("pruned %d activity entries older than %s", total, cutoff.isoformat())
    return total
