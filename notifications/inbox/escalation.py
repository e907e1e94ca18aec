"""Escalation: an inbox item of a kind with ``escalate`` still unread after ``after_s`` is sent on the escalation's
channels once, through the ordinary send path; not at all if it was read (or archived) first.

No timer per item: a send to the inbox puts the item's id in its class's escalation set (a Redis zset scored by
when it is due), and beat's drain (sluice.inbox.escalate, every 10 s by default) takes what is due,
like the digest's held folds. A drainer claims its items into a second zset under a lease and drops each only once
it is finished; a drainer killed mid-drain leaves its claims to run out, and the next drain takes them over. The
escalation's send has an id derived from the item's, so a takeover that publishes it again is a duplicate the send
claim and the "sent" marks skip: each item escalates once.
"""

import json
import logging
import time
import uuid

from django.utils import timezone

from digest.admission_wire import decode_plan, plan_field
from notifications.inbox.models import InboxItem
from pipeline import metrics
from pipeline.bounded_push import PUSHED, push
from pipeline.conf import CLASSES, sluice_settings
from pipeline.connections import class_redis
from pipeline.errors import NotReplicated
from pipeline.message import event_kwargs_json, send_message
from pipeline.redis import keys

from ..policy import default_plan
from .unread import script

logger = logging.getLogger("sluice.inbox")

# Longer than a drain of one batch takes; after it, another drainer takes a dead one's items over.
LEASE_S = 60
BATCH = 200
NAMESPACE = uuid.UUID("5b1d8a56-6f0e-4c43-9a43-7f3c2f6c1e2d")


def schedule(item, kind):
    """Put ``item`` in its class's escalation set, due ``after_s`` after it was created (kept when already there:
    a fold never delays it)."""
    if kind.escalate is None:
        return
    after_s, _channels = kind.escalate
    due = item.created_at.timestamp() + after_s
    class_redis(kind.klass).zadd(keys.inbox_escalations(kind.klass), {str(item.pk): due}, nx=True)


def notification_id(item_id):
    """The escalation's send id: the same for every publish of one item's escalation, so it is sent once."""
    return uuid.uuid5(NAMESPACE, f"inbox-escalation:{item_id}").hex


def drain(lease_s=LEASE_S, batch=BATCH, now=None):
    """Escalate every due item of every class: return {"sent": n, "cancelled": n, "waiting": n}."""
    totals = {"sent": 0, "cancelled": 0, "waiting": 0}
    classes = {kind.klass for kind in sluice_settings().kinds.values() if kind.escalate}
    for klass in CLASSES:
        if klass in classes:
            for result, n in drain_class(klass, lease_s, batch, now).items():
                totals[result] += n
    return totals


def drain_class(klass, lease_s=LEASE_S, batch=BATCH, now=None):
    """Escalate the due items of one class, a batch at a time, until none is due or its queue is full."""
    client = class_redis(klass)
    totals = {"sent": 0, "cancelled": 0, "waiting": 0}
    while True:
        taken = script("claim_escalations", on=client)(
            keys=[keys.inbox_escalations(klass), keys.inbox_escalating(klass)],
            args=[now or time.time(), lease_s, batch],
        )
        if not taken:
            return totals
        items = InboxItem.objects.in_bulk([int(i) for i in taken])
        for raw in taken:
            result = escalate(klass, int(raw), items.get(int(raw)))
            totals[result] += 1
            if result == "waiting":
                continue  # the queue is full: it stays claimed, and is taken again once its lease runs out
            client.zrem(keys.inbox_escalating(klass), raw)
        if totals["waiting"]:
            return totals


def escalate(klass, item_id, item):
    """Escalate one claimed item: "sent", "cancelled" (read, archived, gone, or no channel left), or "waiting"."""
    conf = sluice_settings()
    kind = conf.kinds.get(item.kind) if item is not None else None
    if item is not None and item.escalated_at is not None:
        return "sent"  # a takeover of an item its first drainer escalated: nothing to do, counted once already
    if item is None or not item.unread or kind is None or kind.escalate is None:
        metrics.count(metrics.escalation_field(klass, "cancelled"), klass=klass)
        return "cancelled"
    channels = _allowed(kind, item.user_id)
    if not channels:
        metrics.count(metrics.escalation_field(klass, "cancelled"), klass=klass)
        return "cancelled"
    queue = conf.queues[kind.klass]
    nid = notification_id(item.pk)
    payload = json.dumps(item.payload, ensure_ascii=False, separators=(",", ":"))
    kwargs = event_kwargs_json(
        nid, kind.name, item.user_id, item.entity_id, payload, count=item.count, channels=channels
    )
    try:
        pushed = push(queue, send_message(kind.klass, nid, kwargs, queue.name, kind.name, item.count), kind.klass)
    except NotReplicated as exc:
        # On the primary, unconfirmed: pushing it again would send it twice; as a send's end, counted and logged.
        metrics.count_unconfirmed(exc)
        logger.warning("inbox item %s escalated unconfirmed by its replicas: %s", item.pk, exc)
        pushed = PUSHED
    if pushed != PUSHED:
        return "waiting"
    if InboxItem.objects.filter(pk=item.pk, escalated_at__isnull=True).update(escalated_at=timezone.now()):
        metrics.count(metrics.escalation_field(klass, "sent"), klass=klass)
    return "sent"


def _allowed(kind, user_id):
    """The escalation's channels the user has not turned off for this kind (their mirrored plan, or the kind's
    default); a channel the user takes as a digest is sent on its own here (docs/inbox.md)."""
    _after_s, channels = kind.escalate
    plan = class_redis(kind.klass).hget(keys.preferences(user_id), plan_field(kind.name))
    instant, digest, _strict = decode_plan(
        plan.decode() if plan is not None and not kind.mandatory else default_plan(kind)
    )
    on = {*instant, *digest}
    return [channel for channel in channels if channel in on or channel not in kind.channels]
