"""Delivery status records: which provider accepted each send, and what it reported since (delivered, bounced ...).

A worker records the send (status "sent", the provider and its message id). Anymail's tracking webhooks and the
HTTP providers' status callbacks then move the record forward, never back (models.RANK). A hard bounce or a
complaint also suppresses the address. Records are pruned SLUICE_DELIVERY_RETENTION_DAYS after their send.
"""

import logging
import re
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import transaction
from django.utils import timezone

from pipeline import metrics
from pipeline.celery import app
from pipeline.conf import sluice_settings

from .delivery_models import RANK, Delivery
from .suppressions import clean, suppress

logger = logging.getLogger("sluice.delivery")

PRUNE_TASK = "sluice.delivery.prune"
PRUNE_BATCH = 1000
#: The statuses that put the recipient's address on the suppression list.
SUPPRESSING = ("bounced", "complained")
# What a notification id or a provider's message id may look like, when it comes from outside.
SAFE_ID = re.compile(r"^[\w.:@<>/+=-]{1,255}$")


def record_sent(message, provider, provider_message_id=None):
    """Record that ``provider`` accepted ``message``. Best effort: the send went out, and a record that cannot be
    written (the database down or locked) must not make it go out again; it is logged and the send stands."""
    fields = {
        "provider": provider,
        "provider_message_id": (provider_message_id or "")[:255],
        "user_id": message.user_id,
        "kind": message.kind,
    }
    try:
        row, created = Delivery.objects.get_or_create(
            notification_id=message.id, channel=message.channel, defaults={**fields, "status": "sent"}
        )
        if not created:
            # A tracking event carrying the notification id got here first: keep the status it brought.
            if not fields["provider_message_id"]:
                fields["provider_message_id"] = row.provider_message_id
            Delivery.objects.filter(pk=row.pk).update(**fields)
    except Exception as exc:  # noqa: BLE001 - the record is the send's shadow, never a reason to resend
        logger.warning("send %s on %s via %s: not recorded: %s", message.id, message.channel, provider, exc)
        return False
    if created:
        metrics.count(metrics.delivery_status_field(message.channel, provider, "sent"))
    return True


@dataclass(frozen=True)
class StatusEvent:
    """What a provider reported about one message, normalized."""

    #: "sent", "delivered", "failed", "bounced", "complained", or None for an event that only says it was opened.
    status: str | None
    message_id: str = ""
    notification_id: str = ""
    channel: str = ""
    #: Only this provider's records may match (a callback names its provider); "" for any.
    provider: str = ""
    recipient: str = ""
    detail: str = ""
    at: datetime | None = None
    opened: bool = False


def apply(event, reported_by=""):
    """Move the matching record forward; suppress the address after a bounce or a complaint.

    Returns "updated", "unchanged", "created" (the event came before the worker's record, with its
    notification id) or "unmatched" (counted in sluice_delivery_events_unmatched_total).
    """
    at = event.at or timezone.now()
    with transaction.atomic():
        row = _find(event)
        if row is None:
            result = _create(event, at)
        else:
            result = _update(row, event, at)
    if event.status in SUPPRESSING and event.recipient:
        suppress(event.recipient, event.status, reported_by or event.provider, event.notification_id, event.detail)
    return result


def _find(event):
    rows = Delivery.objects.select_for_update()
    if _safe(event.notification_id) and event.channel:
        row = rows.filter(notification_id=event.notification_id, channel=event.channel).first()
        if row is not None:
            return row
    if _safe(event.message_id):
        matching = rows.filter(provider_message_id=event.message_id)
        if event.provider:
            matching = matching.filter(provider=event.provider)
        return matching.first()
    return None


def _create(event, at):
    if not (_safe(event.notification_id) and event.channel in sluice_settings().channels):
        metrics.count(metrics.DELIVERY_UNMATCHED)
        return "unmatched"
    status = event.status or ("delivered" if event.opened else "sent")
    Delivery.objects.get_or_create(
        notification_id=event.notification_id,
        channel=event.channel,
        defaults={
            "provider": event.provider,
            "provider_message_id": event.message_id[:255] if _safe(event.message_id) else "",
            "status": status,
            "recipient": event.recipient[:254],
            "detail": clean(event.detail),
            "delivered_at": at if status == "delivered" else None,
            "opened_at": at if event.opened else None,
        },
    )
    metrics.count(metrics.delivery_status_field(event.channel, event.provider or "unknown", status))
    return "created"


def _update(row, event, at):
    changes = {}
    status = event.status
    if event.opened and row.status == "sent":
        status = "delivered"  # an open proves the delivery that the ESP may never report
    if status in RANK and RANK[status] > RANK[row.status]:
        changes["status"] = status
        changes["detail"] = clean(event.detail)
    if status == "delivered" and row.delivered_at is None:
        changes["delivered_at"] = at
    if event.opened and row.opened_at is None:
        changes["opened_at"] = at
    if event.recipient and not row.recipient:
        changes["recipient"] = event.recipient[:254]
    if _safe(event.message_id) and not row.provider_message_id:
        changes["provider_message_id"] = event.message_id
    if not changes:
        return "unchanged"
    Delivery.objects.filter(pk=row.pk).update(**changes, updated_at=timezone.now())
    if "status" in changes:
        metrics.count(metrics.delivery_status_field(row.channel, row.provider or "unknown", changes["status"]))
    return "updated"


def _safe(value):
    return isinstance(value, str) and bool(SAFE_ID.match(value))


@app.task(name=PRUNE_TASK, ignore_result=True)
def prune():
    """Delete the records older than SLUICE_DELIVERY_RETENTION_DAYS, in batches; return how many went."""
    cutoff = timezone.now() - timedelta(days=sluice_settings().delivery_retention_days)
    total = 0
    while ids := list(Delivery.objects.filter(sent_at__lt=cutoff).values_list("pk", flat=True)[:PRUNE_BATCH]):
        total += Delivery.objects.filter(pk__in=ids).delete()[0]
    if total:
        metrics.count(metrics.DELIVERY_PRUNED, total)
    logger.info("pruned %d delivery status records sent before %s", total, cutoff.isoformat())
    return total
