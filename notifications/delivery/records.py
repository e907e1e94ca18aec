"""Delivery status records: which provider accepted each send, and what it reported since (delivered, bounced ...).

A worker records the send (status "sent", the provider, its message id and the address it went to). Anymail's
tracking webhooks and the HTTP providers' status callbacks then move the record forward, never back (models.RANK).
A hard bounce or a complaint also suppresses the address, but only when it matches a record of a provider that
sent through the reporting ESP, and names the address that send went to. Records are pruned
SLUICE_DELIVERY_RETENTION_DAYS after their send.
"""

import logging
import re
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from notifications.activity import record as activity
from notifications.delivery.models import RANK, Delivery, Suppression
from notifications.delivery.suppressions import clean, suppress
from pipeline import activity_fields, housekeeping, metrics
from pipeline.broker.queues import queue_for_class
from pipeline.celery import task
from pipeline.conf import sluice_settings
from pipeline.connections import class_redis

logger = logging.getLogger("sluice.delivery")

PRUNE_TASK = "sluice.delivery.prune"
PRUNE_BATCH = 1000
# The prune runs where unrouted tasks go: the background pool.
PRUNE_SCOPE = "background"
#: The statuses that put the recipient's address on the suppression list.
SUPPRESSING = ("bounced", "complained")
# What a notification id or a provider's message id may look like, when it comes from outside.
SAFE_ID = re.compile(r"^[\w.:@<>/+=-]{1,255}$")


def record_sent(message, provider, provider_message_id=None, recipient=""):
    """Record that ``provider`` accepted ``message`` for ``recipient`` (the address it went to). Best effort: the
    send went out, and a record that cannot be written (the database down or locked) must not make it go out
    again; it is logged and the send stands."""
    fields = {
        "provider": provider,
        "provider_message_id": (provider_message_id or "")[:255],
        "recipient": (recipient or "")[:254],
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
    #: Only the records of these (channel, provider) pairs may match (the providers sending through the reporting
    #: ESP); None for no such limit.
    senders: frozenset | None = None
    recipient: str = ""
    detail: str = ""
    at: datetime | None = None
    opened: bool = False


def apply(event, reported_by=""):
    """Move the matching record forward; suppress the address after a bounce or a complaint that names it.

    Returns "updated", "unchanged", "created" (the event came before the worker's record, with its
    notification id), "unmatched" (counted in sluice_delivery_events_unmatched_total) or "other_recipient" (the
    record's send went to another address than the event names: nothing changes).
    """
    at = event.at or timezone.now()
    address = None
    with transaction.atomic():
        row = _find(event)
        if row is None:
            result = _create(event, at)
        elif event.recipient and row.recipient and not _same_address(event.recipient, row.recipient):
            result = "other_recipient"
        else:
            result = _update(row, event, at)
            if event.status in SUPPRESSING and row.recipient and _same_address(event.recipient, row.recipient):
                address = row.recipient
    if address is not None:
        # Only an address a send of this provider went to, as the send recorded it: an event naming anyone
        # else suppresses no one.
        suppress(address, event.status, reported_by or event.provider, row.notification_id, event.detail)
    return result


def _same_address(one, other):
    return Suppression.normalize(one) == Suppression.normalize(other)


def _find(event):
    rows = Delivery.objects.select_for_update()
    if event.senders is not None:
        allowed = Q(pk__in=[])
        for channel, provider in event.senders:
            allowed |= Q(channel=channel, provider=provider)
        rows = rows.filter(allowed)
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
    channels = sluice_settings().channels if event.senders is None else {channel for channel, _ in event.senders}
    if not (_safe(event.notification_id) and event.channel in channels):
        metrics.count(metrics.DELIVERY_UNMATCHED)
        return "unmatched"
    senders = sorted(p for c, p in event.senders or () if c == event.channel)
    status = event.status or ("delivered" if event.opened else "sent")
    _row, created = Delivery.objects.get_or_create(
        notification_id=event.notification_id,
        channel=event.channel,
        defaults={
            # The one provider of the channel sending through this ESP, when there is one; the worker's record
            # sets it anyway. No recipient: only the send says where it went.
            "provider": event.provider or (senders[0] if len(senders) == 1 else ""),
            "provider_message_id": event.message_id[:255] if _safe(event.message_id) else "",
            "status": status,
            "detail": clean(event.detail),
            "delivered_at": at if status == "delivered" else None,
            "opened_at": at if event.opened else None,
        },
    )
    if not created:  # another provider's record: not this event's to change
        metrics.count(metrics.DELIVERY_UNMATCHED)
        return "unmatched"
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
    if _safe(event.message_id) and not row.provider_message_id:
        changes["provider_message_id"] = event.message_id
    if not changes:
        return "unchanged"
    Delivery.objects.filter(pk=row.pk).update(**changes, updated_at=timezone.now())
    if "status" in changes:
        metrics.count(metrics.delivery_status_field(row.channel, row.provider or "unknown", changes["status"]))
    _log(row, changes, event)
    return "updated"


# A provider's word, as the activity log names it.
LOGGED = {"delivered": activity_fields.DELIVERED, "bounced": activity_fields.BOUNCED}
LOGGED["complained"] = activity_fields.COMPLAINED


def _log(row, changes, event):
    """Write what the provider reported (delivered, bounced, complained, opened) to the user's activity log."""
    if not row.user_id or not get_user_model()._default_manager.filter(pk=row.user_id).exists():
        return  # a record of a user who is gone has no log to add to
    said = [LOGGED[changes["status"]]] if changes.get("status") in LOGGED else []
    if "opened_at" in changes:
        said.append(activity_fields.OPENED)
    for outcome in said:
        activity.write(
            row.user_id,
            outcome,
            kind=row.kind,
            notification_id=row.notification_id,
            channel=row.channel,
            provider=row.provider,
            detail=clean(event.detail),
        )


def _safe(value):
    return isinstance(value, str) and bool(SAFE_ID.match(value))


@task(name=PRUNE_TASK, ignore_result=True)
def prune():
    """Delete the records older than SLUICE_DELIVERY_RETENTION_DAYS, in batches, within a step's budget (the next
    step asked for while old records are left); return how many went."""
    client = class_redis(PRUNE_SCOPE)
    with housekeeping.step(PRUNE_TASK, PRUNE_SCOPE, client) as step:
        if step is None:
            return 0
        cutoff = timezone.now() - timedelta(days=sluice_settings().delivery_retention_days)
        total = housekeeping.delete_in_batches(Delivery.objects.filter(sent_at__lt=cutoff), step, PRUNE_BATCH)
    if step.more:
        housekeeping.again(prune, PRUNE_SCOPE, client, queue=queue_for_class(PRUNE_SCOPE))
    if total:
        metrics.count(metrics.DELIVERY_PRUNED, total)
    logger.info(
        "pruned %d delivery status records sent before %s%s",
        total,
        cutoff.isoformat(),
        ", more to come" if step.more else "",
    )
    return total
