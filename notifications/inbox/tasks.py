"""The inbox's periodic tasks, run by Sluice's beat: expire old items, and escalate unread ones, in bounded steps."""

import logging
from datetime import timedelta

from django.utils import timezone

from notifications.inbox.models import InboxItem
from pipeline import housekeeping, metrics
from pipeline.broker.queues import queue_for_class
from pipeline.celery import task
from pipeline.conf import sluice_settings
from pipeline.connections import class_redis

from . import escalation, unread

logger = logging.getLogger("sluice.inbox")

PRUNE_TASK = "sluice.inbox.prune"
ESCALATE_TASK = "sluice.inbox.escalate"
ESCALATE_STEP_TASK = "sluice.inbox.escalate_step"
PRUNE_BATCH = 1000
# The prune runs where unrouted tasks go: the background pool.
PRUNE_SCOPE = "background"


@task(name=ESCALATE_TASK, ignore_result=True)
def escalate():
    """Beat's tick: ask each class that has escalating kinds for a step of its drain, on that class's own pool (so
    a flood of escalations of a routine kind never holds a critical worker); return the classes asked."""
    asked = []
    for klass in escalation.classes():
        if housekeeping.again(escalate_step, klass, class_redis(klass), **_step_options(klass)):
            asked.append(klass)
    return asked


@task(name=ESCALATE_STEP_TASK, ignore_result=True)
def escalate_step(klass):
    """One step of a class's escalation drain (notifications.inbox.escalation), within its budget and under its
    lease; the next step is asked for at the back of the queue while due items are left. Return what it did."""
    client = class_redis(klass)
    with housekeeping.step(ESCALATE_STEP_TASK, klass, client) as step:
        if step is None:
            return None  # another step of this class's drain runs
        totals = escalation.drain_class(klass, step=step)
    if step.more:
        housekeeping.again(escalate_step, klass, client, **_step_options(klass))
    if any(totals.values()):
        logger.info(
            "inbox escalations (%s): %d sent, %d cancelled, %d waiting for room",
            klass,
            totals["sent"],
            totals["cancelled"],
            totals["waiting"],
        )
    return totals


def _step_options(klass):
    return {"kwargs": {"klass": klass}, "queue": queue_for_class(klass)}


@task(name=PRUNE_TASK, ignore_result=True)
def prune():
    """Delete the items untouched for SLUICE_INBOX["retention_days"], in batches, and recount their users' unread
    counts, within a step's budget (the next step asked for while old items are left); return how many went."""
    client = class_redis(PRUNE_SCOPE)
    with housekeeping.step(PRUNE_TASK, PRUNE_SCOPE, client) as step:
        if step is None:
            return 0
        total = _prune(step)
    if step.more:
        housekeeping.again(prune, PRUNE_SCOPE, client, queue=queue_for_class(PRUNE_SCOPE))
    return total


def _prune(step):
    cutoff = timezone.now() - timedelta(days=sluice_settings().inbox.retention_days)
    total = 0
    old = InboxItem.objects.filter(updated_at__lt=cutoff)
    # At least one batch a step, however small its budget: every step makes progress.
    while rows := list(old.values_list("pk", "user_id")[:PRUNE_BATCH]):
        total += InboxItem.objects.filter(pk__in=[pk for pk, _user in rows]).delete()[0]
        for user_id in {user for _pk, user in rows}:
            unread.refresh(user_id)
        if len(rows) < PRUNE_BATCH:
            break  # the last of them
        if step.over():
            step.more = True
            break
    if total:
        metrics.count(metrics.INBOX_PRUNED, total)
    more = ", more to come" if step.more else ""
    logger.info("pruned %d inbox items untouched since %s%s", total, cutoff.isoformat(), more)
    return total
