"""The inbox's periodic tasks, run by Sluice's beat: expire old items, and escalate unread ones."""

import logging
from datetime import timedelta

from django.utils import timezone

from notifications.inbox.models import InboxItem
from pipeline import metrics
from pipeline.celery import task
from pipeline.conf import sluice_settings

from . import escalation, unread

logger = logging.getLogger("sluice.inbox")

PRUNE_TASK = "sluice.inbox.prune"
ESCALATE_TASK = "sluice.inbox.escalate"
PRUNE_BATCH = 1000


@task(name=ESCALATE_TASK, ignore_result=True)
def escalate():
    """Send the due escalations of unread items (notifications.inbox.escalation); return what it did."""
    totals = escalation.drain()
    if any(totals.values()):
        logger.info("inbox escalations: %(sent)d sent, %(cancelled)d cancelled, %(waiting)d waiting for room", totals)
    return totals


@task(name=PRUNE_TASK, ignore_result=True)
def prune():
    """Delete the items untouched for SLUICE_INBOX["retention_days"], in batches, and recount their users' unread
    counts; return how many went."""
    cutoff = timezone.now() - timedelta(days=sluice_settings().inbox["retention_days"])
    total = 0
    old = InboxItem.objects.filter(updated_at__lt=cutoff)
    while rows := list(old.values_list("pk", "user_id")[:PRUNE_BATCH]):
        total += InboxItem.objects.filter(pk__in=[pk for pk, _user in rows]).delete()[0]
        for user_id in {user for _pk, user in rows}:
            unread.refresh(user_id)
    if total:
        metrics.count(metrics.INBOX_PRUNED, total)
    logger.info("pruned %d inbox items untouched since %s", total, cutoff.isoformat())
    return total
