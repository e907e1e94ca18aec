"""Escalation: an inbox item of a kind with ``escalate`` still unread after ``after_s`` goes out on the escalation's
channels once, admitted as any event of its kind for its user; not at all if it was read (or archived) first.

Admission decides it (pipeline.admission, the one way in): the user's mirrored choices for the kind, narrowed to
the escalation's channels, send it now, fold it into the user's digest with the ordinary fold key, or hold it through
quiet hours or a cadence; the bounds apply as to any event.

No timer per item: a send to the inbox puts the item's id in its class's escalation set (a Redis zset scored by
when it is due), and the class's own pool drains what is due in bounded steps (notifications.inbox.tasks: beat's
tick, every 10 s by default, asks for them; pipeline.housekeeping holds each to its budget, one at a time per
class). A drainer claims a batch into a second zset under a lease and drops each item only once it is finished; a
drainer killed mid-drain leaves its claims to run out, and the next drain takes them over. A batch's work is done
together: one query for its items, one round trip for their admissions, one UPDATE for those escalated. The
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

from notifications.inbox.models import InboxItem
from pipeline import metrics
from pipeline.activity_fields import title_of
from pipeline.admission import wire
from pipeline.admission.event import Event
from pipeline.admission.runner import admit_many
from pipeline.conf import CLASSES, sluice_settings
from pipeline.connections import class_redis
from pipeline.connections import script as engine_scripts
from pipeline.errors import NotReplicated
from pipeline.redis import keys

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


def classes():
    """The classes that have a kind that escalates, in CLASSES order."""
    escalating = {kind.klass for kind in sluice_settings().kinds.values() if kind.escalate}
    return [klass for klass in CLASSES if klass in escalating]


def drain(lease_s=LEASE_S, batch=None, now=None):
    """Escalate every due item of every class, without a budget: return {"sent": n, "cancelled": n, "waiting": n}.
    For tools and tests; the workers drain a class a step at a time (notifications.inbox.tasks)."""
    totals = {"sent": 0, "cancelled": 0, "waiting": 0}
    for klass in classes():
        for result, n in drain_class(klass, lease_s, batch, now).items():
            totals[result] += n
    return totals


def drain_class(klass, lease_s=LEASE_S, batch=None, now=None, step=None):
    """Escalate the due items of one class, a batch at a time, until none is due, its queue is full, or ``step`` (a
    pipeline.housekeeping.Step) has spent its budget; then ``step.more`` says whether items may be left. Return the
    totals."""
    client = class_redis(klass)
    totals = {"sent": 0, "cancelled": 0, "waiting": 0}
    # At least one batch a step, however small its budget: every step makes progress.
    while True:
        taken = engine_scripts("claim_due", on=client)(
            keys=[keys.inbox_escalations(klass), keys.inbox_escalating(klass)],
            args=[now or time.time(), lease_s, batch or BATCH],
        )
        if not taken:
            return totals
        results = escalate_batch(klass, [int(raw) for raw in taken])
        # An item that found no room stays claimed, and is taken again once its lease runs out.
        finished = [raw for raw in taken if results[int(raw)] != "waiting"]
        if finished:
            client.zrem(keys.inbox_escalating(klass), *finished)
        for result in results.values():
            totals[result] += 1
        if totals["waiting"]:
            return totals
        if step is not None and step.over():
            step.more = True
            return totals


def escalate(klass, item_id, item):
    """Escalate one claimed item (escalate_batch of one): "sent", "cancelled" or "waiting"."""
    return escalate_batch(klass, [item_id], {item_id: item} if item is not None else {})[item_id]


def escalate_batch(klass, item_ids, items=None):
    """Escalate claimed items of one class, the batch's work done together: one query for the items, one round trip
    for their admissions, one UPDATE for those escalated. Return {item id: "sent" (admitted: sent now, or folded
    into the user's digest or held by their quiet hours or cadence), "cancelled" (read, archived, gone, or no
    channel left), or "waiting" (no room, or its admission not confirmed by the replicas yet)}."""
    conf = sluice_settings()
    items = InboxItem.objects.in_bulk(item_ids) if items is None else items
    results, due = {}, []
    for item_id in item_ids:
        item = items.get(item_id)
        kind = conf.kinds.get(item.kind) if item is not None else None
        if item is not None and item.escalated_at is not None:
            results[item_id] = "sent"  # a takeover of an item its first drainer escalated: counted once already
        elif item is None or not item.unread or kind is None or kind.escalate is None:
            results[item_id] = "cancelled"
        else:
            due.append((item, kind))
    escalated = []
    for (item, _kind), done in zip(due, _admit(due), strict=True):
        if done.outcome == wire.SUPPRESSED:
            results[item.pk] = "cancelled"
        elif done.outcome in ADMITTED:
            results[item.pk] = "sent"
            escalated.append(item.pk)
        else:
            results[item.pk] = "waiting"  # no room (its queue, overflow or the fold store), or unconfirmed
    # Admitted now, or by a drainer that died before recording it (replayed): recorded and counted once.
    sent = InboxItem.objects.filter(pk__in=escalated, escalated_at__isnull=True).update(escalated_at=timezone.now())
    cancelled = sum(1 for result in results.values() if result == "cancelled")
    for result, n in (("sent", sent), ("cancelled", cancelled)):
        if n:
            metrics.count(metrics.escalation_field(klass, result), n, klass=klass)
    return results


def _admit(due):
    """Admit each item's escalation as an event of its kind for the item's user, the batch in one round trip
    (pipeline.admission.runner.admit_many): the user's mirrored choices for the kind, narrowed to the escalation's
    channels, decide it as any event's (sent now, folded into their digest with the ordinary fold key, held by quiet
    hours or cadence), and its idempotency key, recorded in the same step, makes it once. A batch its replicas did not
    confirm stays claimed: the next drain's admission replays the recorded outcomes once the replicas have them (their
    idempotency keys), or admits them afresh if a failover lost them: never twice, never lost."""
    try:
        return admit_many([_event(item, kind) for item, kind in due])
    except NotReplicated as exc:
        metrics.count_unconfirmed(exc)
        logger.warning("%d inbox escalations are not confirmed by the replicas yet: %s", len(due), exc)
        return [wire.Admission(None)] * len(due)


def _event(item, kind):
    """The escalation of ``item`` as an event of its kind for admission."""
    # As notify() carries a user's pk: an int, or its text (a UUID primary key is not JSON).
    user_id = item.user_id if isinstance(item.user_id, int) else str(item.user_id)
    return Event(
        kind,
        notification_id(item.pk),
        user_id,
        item.entity_id,
        json.dumps(item.payload, ensure_ascii=False, separators=(",", ":")),
        keys.idempotency(SCOPE, str(item.pk)),
        count=item.count,
        escalation=tuple(kind.escalate[1]),
        idempotency_ttl_s=ONCE_TTL_S,
        title=title_of(item.payload),
    )
