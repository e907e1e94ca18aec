"""Schedule one send for many users at once (notify_many(..., send_at=...)): moving a meeting is one call per
occurrence, each chunk of users one query for their pending sends, one reservation step and one write.

Each user's send is scheduled, or moved, exactly as api.schedule() schedules one: identified by user, kind, entity
and key; moved by a conditional update (a send the mover took already goes out, and a new one is scheduled beside
it); a critical kind's users take seconds of the window latest first in one Redis step, and those that find none are
rejected by name, with the earliest second that has room.
"""

import time
from typing import NamedTuple

from django.db import IntegrityError, transaction
from django.db.models import Count

from pipeline import metrics
from pipeline.admission import schedule as staging
from pipeline.admission.event import key_ttl
from pipeline.admission.idempotency import forget_key, record_keys
from pipeline.conf import sluice_settings

from ..outcome import Outcome
from . import api
from .models import PENDING, ScheduledSend


def schedule_many(events, send_at, key, result):
    """Schedule each of ``events`` (validated, one kind and entity, one per user) for ``send_at`` (Unix seconds), or
    move its pending send; add what became of each to ``result`` (notifications.fanout.Fanout). Raises Redis's and
    the database's errors, as api.schedule() does."""
    if not events:
        return
    klass = events[0].kind.klass
    keyed = [event.idempotency for event in events if event.idempotency]
    if keyed:
        # Recorded first, as api.schedule() records one; the keys of sends that then fail are forgotten.
        held = dict(zip(keyed, record_keys(klass, keyed, api.SCHEDULED, key_ttl(events[0])), strict=True))
        for recorded in filter(None, held.values()):
            result.add(Outcome(recorded))
            result.replayed += 1
        events = [event for event in events if not held.get(event.idempotency)]
    done = set()
    try:
        done = _schedule(events, send_at, key, result)
    finally:
        forget_key(klass, *(e.idempotency for e in events if e.idempotency and e.user_id not in done))


def _schedule(events, send_at, key, result):
    """Schedule ``events``; return the users whose send was scheduled or moved."""
    kind, conf = events[0].kind, sluice_settings()
    klass, entity_id = kind.klass, events[0].entity_id
    identity = {"kind": kind.name, "entity_id": entity_id, "key": key}
    existing = {
        row.user_id: row
        for row in ScheduledSend.objects.filter(
            **identity, state=PENDING, user_id__in=[event.user_id for event in events]
        )
    }
    events = _within_bound(events, existing, conf.schedule.max_per_user, result)
    due, rejected = _reserve(kind, send_at, events, existing)
    if rejected:
        result.rejected.extend(event.user_id for event in rejected)
        result.available_at = rejected[0].available_at
    placed = events[: len(due)]
    if not placed:
        return set()
    try:
        with transaction.atomic():
            moved, added = _write(placed, due, existing, identity, klass, send_at, klass in api.RESERVING, result)
    except IntegrityError:
        # Another call scheduled one of these at the same moment: give the seconds back, and schedule one by one.
        _give_back(klass, due, placed, existing)
        for event in placed:
            found = api.schedule(event, send_at, key)
            result.add(found.outcome)
            result.moved += found.moved
        return {event.user_id for event in placed}
    except BaseException:
        _give_back(klass, due, placed, existing)
        raise
    metrics.count_many(
        {metrics.scheduled_field(klass, "moved"): len(moved), metrics.scheduled_field(klass, "scheduled"): len(added)},
        klass=klass,
    )
    result.add(Outcome.SCHEDULED, len(placed))
    result.moved += len(moved)
    soon = time.time() + conf.schedule.staged_s * 1.5
    staged = {row.pk: row.due_at.timestamp() for row in (*moved, *added) if row.due_at.timestamp() <= soon}
    if staged:
        transaction.on_commit(lambda: api.stage_now(klass, staged))
    return {event.user_id for event in placed}


def _within_bound(events, existing, bound, result):
    """``events`` less those of users who hold ``bound`` pending sends and have none to move (``schedule_full``)."""
    new = [event.user_id for event in events if event.user_id not in existing]
    if not new:
        return events
    counts = ScheduledSend.objects.filter(user_id__in=new, state=PENDING).values("user_id").annotate(n=Count("id"))
    full = {row["user_id"] for row in counts if row["n"] >= bound}
    result.schedule_full.extend(event.user_id for event in events if event.user_id in full)
    return [event for event in events if event.user_id not in full]


class _Refused(NamedTuple):
    user_id: object
    available_at: float | None


def _reserve(kind, send_at, events, existing):
    """(each placed event's due second, in order; the events refused, as _Refused): a reserving class's seconds of
    the window, latest first, for as many as fit (each giving up the second of the send it moves); every send_at for
    a class that does not reserve."""
    klass = kind.klass
    if klass not in api.RESERVING:
        return [send_at] * len(events), []
    rate = sluice_settings().schedule.classes[klass]
    earliest, latest = api.window_of(kind, send_at)
    holding = [_held(existing.get(event.user_id)) for event in events]
    seconds, available = staging.reserve(klass, latest, earliest, holding, rate.slots_per_s)
    refused = events[len(seconds) :]
    if refused:
        metrics.count(metrics.scheduled_field(klass, "rejected"), len(refused), klass=klass)
    return [api.due_in(s, send_at) for s in seconds], [_Refused(event.user_id, available) for event in refused]


def _held(row):
    return int(row.due_at.timestamp()) if row is not None and row.reserved else None


MOVED_FIELDS = ("klass", "send_at", "due_at", "reserved", "payload")


def _write(events, due, existing, identity, klass, send_at, reserved, result):
    """Move the pending sends of ``events`` that have one (a conditional update: the mover may have taken some) and
    add the others (counting in ``result.previous_sent`` those added beside a send being published); return (the rows
    moved, the rows added)."""
    now = api.datetime_of(time.time())
    moving, adding = [], []
    for event, second in zip(events, due, strict=True):
        fields = {
            "klass": klass,
            "send_at": api.datetime_of(send_at),
            "due_at": api.datetime_of(second),
            "reserved": reserved,
            "payload": event.payload_json,
        }
        row = existing.get(event.user_id)
        if row is None:
            adding.append(ScheduledSend(user_id=event.user_id, **identity, **fields))
            continue
        for name, value in fields.items():
            setattr(row, name, value)
        row.version, row.updated_at = row.version + 1, now
        moving.append(row)
    moved = []
    if moving:
        _update_pending(moving)
        # Which of them the update found pending: the others were taken by a mover first, and go out as they were.
        found = dict(
            ScheduledSend.objects.filter(pk__in=[row.pk for row in moving], state=PENDING).values_list("pk", "version")
        )
        for row in moving:
            if found.get(row.pk) == row.version:
                moved.append(row)
            else:
                fields = {name: getattr(row, name) for name in MOVED_FIELDS}
                adding.append(ScheduledSend(user_id=row.user_id, **identity, **fields))
                result.previous_sent += 1
    added = ScheduledSend.objects.bulk_create(adding)
    return moved, added


def _update_pending(rows):
    """Write ``rows``' new fields where each is still pending: one UPDATE for the rows that share their new values (a
    call's rows differ only in the second each took and the version each had: a handful of groups). Django's
    bulk_update writes a CASE for each field, each as long as the rows, so its cost grows with the rows squared:
    moving 180 attendees took it 1.3 s on SQLite (bench schedule --part move)."""
    groups = {}
    for row in rows:
        shared = (*(getattr(row, name) for name in MOVED_FIELDS), row.version, row.updated_at)
        groups.setdefault(shared, []).append(row.pk)
    for shared, pks in groups.items():
        values = dict(zip((*MOVED_FIELDS, "version", "updated_at"), shared, strict=True))
        ScheduledSend.objects.filter(pk__in=pks, state=PENDING).update(**values)


def _give_back(klass, due, events, existing):
    """The write failed: give the new seconds back and take the old ones again (api.give_back)."""
    if klass in api.RESERVING:
        api.give_back(klass, [int(s) for s in due], [_held(existing.get(event.user_id)) for event in events])
