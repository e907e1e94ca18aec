"""The mover: publishes each class's due scheduled sends at their time, exactly once, in bounded steps.

It runs in Sluice's beat (a thread a class, started as beat starts: notifications.scheduling.runner), under a lease
per class (pipeline.housekeeping), so one mover publishes a class however many beats run. A step:

1. takes the staged sends that are due (pipeline.admission.schedule.claim_due: into a claimed set, under a lease);
2. takes their rows in the database with one conditional UPDATE (pending and due, or publishing under a lease that
   ran out: a dead mover's) to "publishing" under this mover's token and a lease. A row moved since (due later) is
   staged again at its new time, a row cancelled since is gone: neither is taken;
3. admits them in one round trip (pipeline.admission.runner.admit_many), each as an event of its kind for its user:
   the user's choices, quiet hours, throttle, the bound and the gate of that moment decide it, with an idempotency
   key and a send id of its own row and version, so a mover that takes over a dead one's rows gets the first
   admission's outcome back and publishes nothing twice;
4. deletes the rows it published, and gives back those whose queue had no room (due again in a moment).

A mover killed anywhere loses nothing: its claims and its rows' leases run out, and the next step takes them over.
"""

import json
import logging
import time
import uuid
from datetime import UTC, datetime, timedelta

from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Q

from pipeline import metrics
from pipeline.activity_fields import title_of
from pipeline.admission import schedule as staging
from pipeline.admission import wire
from pipeline.admission.event import Event
from pipeline.admission.runner import admit_many
from pipeline.conf import sluice_settings
from pipeline.errors import NotReplicated
from pipeline.redis import keys

from .api import notification_id
from .models import PENDING, PUBLISHING, ScheduledSend

logger = logging.getLogger("sluice.scheduling")

# Longer than a step takes; after it, another mover takes a dead one's sends over.
LEASE_S = 30
BATCH = 200
# A send whose queue had no room is due again this soon: lateness is counted in hundreds of milliseconds.
RETRY_S = 0.2
# How long a published send's idempotency key lasts: far past any takeover.
ONCE_TTL_S = 86400
SCOPE = "scheduled"
# What admission did with a send that counts as published: sent at once, folded, collapsed, deferred, or suppressed
# by the user's choices of its time.
TAKEN = (wire.ACCEPTED, wire.FOLDED, wire.COLLAPSED, wire.DEFERRED, wire.SUPPRESSED)


def drain(klass, step=None, now=None, batch=None):
    """Publish ``klass``'s due scheduled sends, a batch at a time, until none is due, or ``step`` (a
    pipeline.housekeeping.Step) has spent its budget (then ``step.more``); return {"published": n, "waiting": n,
    "dropped": n}."""
    totals = {"published": 0, "waiting": 0, "dropped": 0}
    while True:
        ids = staging.claim_due(klass, LEASE_S, batch or BATCH, now)
        if not ids:
            return totals
        for result, n in publish(klass, ids, now).items():
            totals[result] += n
        if step is not None and step.over():
            step.more = True
            return totals


def publish(klass, ids, now=None):
    """Steps 2 to 4 for the claimed sends ``ids`` of ``klass``; return the counts of what became of them."""
    now = time.time() if now is None else now
    token = uuid.uuid4().hex
    rows = _take(klass, ids, now, token)
    taken = {row.pk for row in rows}
    counts = {"published": 0, "waiting": 0, "dropped": 0}
    later = _moved_later(klass, [i for i in ids if i not in taken], now)
    published, waiting = _admit(klass, rows)
    ScheduledSend.objects.filter(pk__in=[row.pk for row in published], mover=token).delete()
    if waiting:
        ScheduledSend.objects.filter(pk__in=[row.pk for row in waiting], mover=token).update(
            state=PENDING, mover="", lease_until=None
        )
        later.update({row.pk: now + RETRY_S for row in waiting})
    staging.stage(klass, later)
    staging.finish(klass, ids)
    if published:
        metrics.count(metrics.scheduled_field(klass, "published"), len(published), klass=klass)
    counts.update(published=len(published), waiting=len(waiting), dropped=len(ids) - len(taken) - len(later))
    return counts


def _take(klass, ids, now, token):
    """Take the rows of ``ids`` that are due now (or whose mover's lease ran out) under ``token``, in one UPDATE."""
    moment = datetime.fromtimestamp(now, UTC)
    due = Q(state=PENDING, due_at__lte=moment) | Q(state=PUBLISHING, lease_until__lte=moment)
    with transaction.atomic():
        ScheduledSend.objects.filter(due, pk__in=ids).update(
            state=PUBLISHING, mover=token, lease_until=moment + timedelta(seconds=LEASE_S)
        )
        return list(ScheduledSend.objects.filter(pk__in=ids, mover=token, state=PUBLISHING))


def _moved_later(klass, ids, now):
    """{row id: when due} of the pending rows among ``ids`` that were moved later: staged again at their time."""
    staged_until = now + sluice_settings().schedule.staged_s
    rows = ScheduledSend.objects.filter(pk__in=ids, state=PENDING).values_list("pk", "due_at")
    return {pk: due.timestamp() for pk, due in rows if due.timestamp() <= staged_until}


def _admit(klass, rows):
    """Admit the rows' sends, each as an event of its kind for its user; return (published, waiting for room)."""
    conf = sluice_settings()
    events, kept = [], []
    for row in rows:
        kind = conf.kinds.get(row.kind)
        if kind is None:
            # Its kind was removed from SLUICE_KINDS: nothing can send it; dropped as published, loudly.
            logger.error("scheduled send %s: its kind %r is no longer in SLUICE_KINDS, dropped", row.pk, row.kind)
            continue
        events.append(_event(row, kind))
        kept.append(row)
    published = [row for row in rows if row not in kept]
    waiting = []
    # One round trip a class: a kind moved to another class since it was scheduled goes out from its class now.
    by_class = {}
    for row, event in zip(kept, events, strict=True):
        by_class.setdefault(event.kind.klass, []).append((row, event))
    for members in by_class.values():
        try:
            done = admit_many([event for _row, event in members])
        except NotReplicated as exc:
            # Admitted on the primary, unconfirmed by its replicas: the rows stay taken, and the takeover's admission
            # replays the recorded outcomes once the replicas have them, or admits them afresh if a failover lost
            # them.
            metrics.count_unconfirmed(exc)
            logger.warning("%d scheduled sends are not confirmed by the replicas yet: %s", len(members), exc)
            continue
        for (row, event), answer in zip(members, done, strict=True):
            (published if answer.outcome in TAKEN else waiting).append(row)
            if answer.outcome in TAKEN and _expired(event):
                # Published past its kind's expiry (it was due while nothing could move it): the send dead-letters
                # it as expired, never sends it late.
                metrics.count(metrics.scheduled_field(klass, "expired"), klass=klass)
    return published, waiting


def _expired(event):
    expires = event.kind.expires_after_s
    return bool(expires) and time.time() > event.send_at + expires


def _event(row, kind):
    """The scheduled send of ``row`` as its kind's event for its user, with an id and an idempotency key of its own
    row and version: admitted once however many movers take it."""
    user = row.user_id
    pk_field = get_user_model()._meta.pk
    user_id = user if isinstance(user, int) else str(pk_field.to_python(user))
    return Event(
        kind,
        notification_id(row.pk, row.version),
        user_id,
        row.entity_id,
        row.payload,
        keys.idempotency(SCOPE, f"{row.pk}:{row.version}"),
        idempotency_ttl_s=ONCE_TTL_S,
        send_at=row.send_at.timestamp(),
        title=title_of(json.loads(row.payload)),
    )
