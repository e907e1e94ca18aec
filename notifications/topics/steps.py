"""A topic fan-out's steps: the next chunk of subscriptions after the job's cursor, admitted as notify_many() admits
its users, then the cursor moved past them; until the step's budget is spent.

Each subscriber's event carries an idempotency key of its job and user, recorded by admission in the same Lua step
that publishes it: a step killed after a chunk was admitted and before its cursor moved runs the chunk again and gets
the recorded outcomes back, publishing nothing twice. The cursor, the counts and the backlog move together in one
UPDATE, so what a job says it did is what its subscribers got, each counted once.
"""

import json
import logging

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from pipeline.admission import wire
from pipeline.connections import class_redis
from pipeline.redis import keys

from ..exceptions import NotifyError
from .models import DONE, FAILED, FANNING, Subscription, TopicFanout

logger = logging.getLogger("sluice.topics")

#: The scope of the subscribers' idempotency keys: "<job token>\0<user>" in it.
SCOPE = "topic"


def fanning(klass):
    """The class's jobs still fanning out, oldest first."""
    return TopicFanout.objects.filter(klass=klass, state=FANNING).order_by("pk")


def run(klass, step):
    """Fan out ``klass``'s jobs, oldest first, chunk by chunk, until none is left or ``step`` (a
    pipeline.housekeeping.Step) has spent its budget (then ``step.more``); return how many subscribers were done."""
    done = 0
    while (job := fanning(klass).first()) is not None:
        while job.state == FANNING:
            done += advance(job)
            if job.state == FANNING and step.over():
                step.more = True
                return done
    return done


def advance(job):
    """One chunk of ``job``: the next wire.MAX_BATCH subscriptions after its cursor, admitted in one round trip, then
    the cursor moved past them (the job finished when none is left); return how many subscribers it did."""
    from ..api import _validate
    from ..fanout import fan_out

    rows = list(
        Subscription.objects.filter(topic=job.topic, pk__gt=job.cursor)
        .order_by("pk")
        .values_list("pk", "user_id")[: wire.MAX_BATCH]
    )
    if not rows:
        _finish(job, DONE)
        return 0
    try:
        template = _validate(None, job.kind, job.entity_id, json.loads(job.payload), None, SCOPE, unknown_user=True)
    except NotifyError as exc:
        # Its kind was removed from SLUICE_KINDS since (or changed so its event no longer passes): nothing can send
        # it; the job says why, and the log.
        logger.error("topic fan-out %s (%s to %s) cannot go on: %s", job.pk, job.kind, job.topic, exc)
        _finish(job, FAILED, error=str(exc)[:500])
        return 0
    users = [user for _pk, user in rows]
    send_at = None if job.send_at is None else job.send_at.timestamp()
    fanned = fan_out(template, users, send_at=send_at, key=job.key, idempotency=(SCOPE, job.token))
    counts = dict(job.counts)
    for outcome, n in fanned.counts.items():
        counts[str(outcome)] = counts.get(str(outcome), 0) + n
    # A subscriber deleted meanwhile (unknown), or one admission could not decide (failed): counted, never silent.
    for name in ("unknown", "failed", "schedule_full"):
        if n := len(getattr(fanned, name)):
            counts[name] = counts.get(name, 0) + n
    rejected = len(fanned.rejected)
    if rejected:
        counts["rejected"] = counts.get("rejected", 0) + rejected
        logger.warning(
            "topic fan-out %s (%s to %s): %d subscribers rejected, no room in the %s queue within its wait",
            job.pk,
            job.kind,
            job.topic,
            rejected,
            job.klass,
        )
    job.cursor, job.done, job.rejected, job.counts = rows[-1][0], job.done + len(rows), job.rejected + rejected, counts
    TopicFanout.objects.filter(pk=job.pk).update(
        cursor=job.cursor,
        done=F("done") + len(rows),
        rejected=F("rejected") + rejected,
        counts=counts,
        updated_at=timezone.now(),
    )
    _backlog(job)
    return len(rows)


def _finish(job, state, error=""):
    now = timezone.now()
    with transaction.atomic():
        TopicFanout.objects.filter(pk=job.pk).update(state=state, error=error, finished_at=now, updated_at=now)
    job.state, job.error, job.finished_at = state, error, now
    _backlog(job)
    logger.info("topic fan-out %s (%s to %s) %s: %d subscribers", job.pk, job.kind, job.topic, state, job.done)


def _backlog(job):
    client = class_redis(job.klass)
    if job.state == FANNING:
        client.hset(keys.topic_backlog(job.klass), job.token, job.left)
    else:
        client.hdel(keys.topic_backlog(job.klass), job.token)
