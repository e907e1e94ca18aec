"""Escalation: an inbox item of a kind with ``escalate`` still unread after ``after_s`` goes out on the escalation's
channels once, admitted as any event of its kind for its user; not at all if it was read (or archived) first.

Admission decides it (digest.admission.admit_event, the one decision): the user's mirrored choices for the kind,
narrowed to the escalation's channels, send it now, fold it into the user's digest with the ordinary fold key, or
hold it through quiet hours or a cadence; the bounds apply as to any event.

No timer per item: a send to the inbox puts the item's id in its class's escalation set (a Redis zset scored by
when it is due), and beat's drain (sluice.inbox.escalate, every 10 s by default) takes what is due,
like the digest's held folds. A drainer claims its items into a second zset under a lease and drops each only once
it is finished; a drainer killed mid-drain leaves its claims to run out, and the next drain takes them over. The
escalation is admitted with an idempotency key of the item's own (recorded in the same Lua step as any caller's
key), so a takeover gets the first admission's outcome back and does not send or fold it again; its send has an id
derived from the item's, so the send claim and the "sent" marks skip any second publish too: each item escalates
once.
"""

import json
import logging
import time
import uuid

from django.utils import timezone

from digest import admission_wire as wire
from digest.admission import admit_event
from digest.flush import enqueue_size_flush
from notifications.inbox.models import InboxItem
from pipeline import metrics
from pipeline.conf import CLASSES, sluice_settings
from pipeline.connections import class_redis
from pipeline.errors import NotReplicated
from pipeline.message import event_kwargs_json, send_message
from pipeline.redis import keys

from ..policy import Event, default_plan
from .unread import script

logger = logging.getLogger("sluice.inbox")

# Longer than a drain of one batch takes; after it, another drainer takes a dead one's items over.
LEASE_S = 60
BATCH = 200
NAMESPACE = uuid.UUID("5b1d8a56-6f0e-4c43-9a43-7f3c2f6c1e2d")
# How long an escalation's idempotency key lasts: far past any takeover (a dead drainer's lease, then beat's next
# drain, every 10 s); the item's escalated_at guards it after that.
ONCE_TTL_S = 86400
# The idempotency scope of escalations: one key per item, never a caller's.
SCOPE = "inbox-escalation"
# What admission did with an escalation that counts as escalated: sent, deferred, folded or collapsed (now, or by a
# drainer that died before recording it: the outcome replayed).
ADMITTED = (wire.ACCEPTED, wire.DEFERRED, wire.FOLDED, wire.COLLAPSED)


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
    """Escalate one claimed item: "sent" (admitted: sent now, or folded into the user's digest or held by their
    quiet hours or cadence), "cancelled" (read, archived, gone, or no channel left), or "waiting" (no room)."""
    conf = sluice_settings()
    kind = conf.kinds.get(item.kind) if item is not None else None
    if item is not None and item.escalated_at is not None:
        return "sent"  # a takeover of an item its first drainer escalated: nothing to do, counted once already
    if item is None or not item.unread or kind is None or kind.escalate is None:
        metrics.count(metrics.escalation_field(klass, "cancelled"), klass=klass)
        return "cancelled"
    try:
        done = _admit(item, kind, conf)
    except NotReplicated as exc:
        # Admitted on the primary, unconfirmed by its replicas: it stays claimed, and the next drain's admission
        # replays the recorded outcome once the replicas have it (its idempotency key), or admits it afresh if a
        # failover lost it: never twice, never lost.
        metrics.count_unconfirmed(exc)
        logger.warning("inbox item %s: its escalation is not confirmed by the replicas yet: %s", item.pk, exc)
        return "waiting"
    if done.flush:
        enqueue_size_flush()
    if done.outcome == wire.SUPPRESSED:
        metrics.count(metrics.escalation_field(klass, "cancelled"), klass=klass)
        return "cancelled"
    if done.outcome not in ADMITTED:
        return "waiting"  # no room (its queue, overflow or the fold store): it stays claimed, for the next drain
    # Admitted now, or by a drainer that died before recording it (replayed): recorded and counted once.
    if InboxItem.objects.filter(pk=item.pk, escalated_at__isnull=True).update(escalated_at=timezone.now()):
        metrics.count(metrics.escalation_field(klass, "sent"), klass=klass)
    return "sent"


def _admit(item, kind, conf):
    """Admit the escalation as an event of its kind for the item's user (digest.admission.admit_event): the user's
    mirrored choices for the kind, narrowed to the escalation's channels, decide it as any event's (sent now,
    folded into their digest with the ordinary fold key, held by quiet hours or cadence), and its idempotency
    key, recorded in the same step, makes it once."""
    _after_s, channels = kind.escalate
    queue = conf.queues[kind.klass]
    nid = notification_id(item.pk)
    payload = json.dumps(item.payload, ensure_ascii=False, separators=(",", ":"))
    kwargs = event_kwargs_json(nid, kind.name, item.user_id, item.entity_id, payload, count=item.count)
    message = send_message(
        kind.klass, nid, kwargs, queue.name, kind.name, item.count, channels_header=wire.CHANNELS_PLACEHOLDER
    )
    event = Event(kind, nid, item.user_id, item.entity_id, payload, keys.idempotency(SCOPE, str(item.pk)))
    plan = default_plan(kind)
    return admit_event(
        event, queue, message, plan, conf.digest, nid, escalation=tuple(channels), idempotency_ttl_s=ONCE_TTL_S
    )
