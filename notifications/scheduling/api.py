"""Schedule a send for later, move it by scheduling it again, cancel it: the database keeps it, Redis its reservation.

notify(..., send_at=...) comes here with its validated event. A send is identified by its user, kind, entity and
``key``: scheduling the same identity again replaces the pending one, time and payload together, in one step of the
database (a conditional UPDATE). The mover may have taken it already (it is being published): then the old one goes
out, the new one is scheduled beside it, and the answer says so (``previous_sent``).

For a class that reserves (SLUICE_SCHEDULE[class]; critical by default), scheduling first reserves the latest
second of the kind's window with room in its pool's rate (pipeline.admission.schedule), giving up the second of the
send it replaces in the same Redis step; no room raises Rejected now, naming the earliest second that has room.
"""

import logging
import time
import uuid
from datetime import UTC, datetime
from typing import NamedTuple

from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from redis.exceptions import RedisError

from notifications.activity import record as activity
from pipeline import activity_fields, metrics
from pipeline.admission import schedule as staging
from pipeline.admission.event import key_ttl
from pipeline.admission.idempotency import forget_key, record_key
from pipeline.conf import sluice_settings

from ..exceptions import InvalidSchedule, Rejected, ScheduleFull
from ..outcome import Outcome
from .models import PENDING, PUBLISHING, ScheduledSend

logger = logging.getLogger("sluice.scheduling")

#: The classes whose scheduled sends reserve a second of their pool's rate: the class that must be on time.
RESERVING = ("critical",)
# A key tells apart two sends of one kind and entity ("1d", "10m"): plain and short, as it goes into logs and admin.
MAX_KEY_LENGTH = 100
SCHEDULED = "scheduled"


class Scheduled(NamedTuple):
    """What scheduling one send came to: SCHEDULED; whether it replaced a pending send of the same user, kind, entity
    and key (``moved``); whether the send it would have replaced was being published already (``previous_sent``:
    that one goes out too); and when it goes out (``due_at``, Unix seconds: its reserved second, or its send_at)."""

    outcome: Outcome
    moved: bool = False
    previous_sent: bool = False
    due_at: float | None = None
    replayed: bool = False


def send_at_of(value, now=None):
    """``value`` (an aware datetime, or Unix seconds) as Unix seconds, within SLUICE_SCHEDULE["horizon_days"] of now;
    InvalidSchedule naming the value otherwise."""
    if isinstance(value, datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise InvalidSchedule(f"send_at must be an aware datetime (with a time zone), got {value.isoformat()}")
        seconds = value.timestamp()
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value)
    else:
        raise InvalidSchedule(f"send_at must be an aware datetime or Unix seconds, got {type(value).__name__}")
    now = time.time() if now is None else now
    if seconds != seconds or seconds < now:  # NaN, or the past
        raise InvalidSchedule(f"send_at {_when(seconds)} is in the past")
    horizon = sluice_settings().schedule
    if seconds > now + horizon.horizon_s:
        raise InvalidSchedule(
            f"send_at {_when(seconds)} is more than SLUICE_SCHEDULE['horizon_days'] ({horizon.horizon_days}) ahead"
        )
    return seconds


def check_key(key):
    """A scheduled send's ``key``: "" for none, else a short plain string; InvalidSchedule otherwise."""
    if key is None:
        return ""
    if not isinstance(key, str) or len(key) > MAX_KEY_LENGTH or any(ord(c) < 32 or ord(c) == 127 for c in key):
        raise InvalidSchedule(f"key must be a string of at most {MAX_KEY_LENGTH} printable characters, got {key!r}")
    return key


def schedule(event, send_at, key=""):
    """Schedule ``event`` (pipeline.admission.event.Event, validated) for ``send_at`` (Unix seconds, send_at_of), or
    move its pending send; return Scheduled. Raises Rejected (a reserving class with no room in the kind's window),
    ScheduleFull, and Redis's errors (notifications.policy turns them into Unavailable)."""
    kind = event.kind
    klass = kind.klass
    conf = sluice_settings()
    if event.idempotency:
        # Recorded first, as admission records a key in the step it decides in; forgotten if scheduling fails, so a
        # retry is decided afresh. (A repeat without a key would only move the send to where it is.)
        recorded = record_key(klass, event.idempotency, SCHEDULED, key_ttl(event))
        if recorded:
            return Scheduled(Outcome(recorded), replayed=True)
        try:
            return _schedule(event, send_at, key, conf)
        except BaseException:
            forget_key(klass, event.idempotency)
            raise
    return _schedule(event, send_at, key, conf)


def _schedule(event, send_at, key, conf):
    kind = event.kind
    klass = kind.klass
    user = event.user_id
    identity = {"user_id": user, "kind": kind.name, "entity_id": event.entity_id, "key": key}
    for attempt in range(3):
        existing = ScheduledSend.objects.filter(**identity, state=PENDING).first()
        if existing is None and _pending_of(user) >= conf.schedule.max_per_user:
            raise ScheduleFull(
                f"user {user!r} has {conf.schedule.max_per_user} sends scheduled: SLUICE_SCHEDULE['max_per_user']"
            )
        due, reserved = _reserve(kind, send_at, existing)
        try:
            with transaction.atomic():
                row, moved, previous_sent = _write(existing, identity, klass, event, send_at, due, reserved)
            break
        except IntegrityError:
            # Another call scheduled the same send at the same moment (one pending per identity): move that one.
            if reserved:
                give_back(klass, [int(due)], [_held(existing)])
            if attempt == 2:
                raise
        except BaseException:
            if reserved:
                give_back(klass, [int(due)], [_held(existing)])
            raise
    metrics.count(metrics.scheduled_field(klass, "moved" if moved else "scheduled"), klass=klass)
    # A move's entry names the id its previous version would have gone out with: the steps of both read as one.
    activity.write(
        user,
        activity_fields.MOVED if moved else activity_fields.SCHEDULED,
        kind=kind.name,
        entity_id=event.entity_id,
        notification_id=notification_id(row.pk, row.version),
        klass=klass,
        detail=f"{send_at:.3f}",
        fold_key=notification_id(row.pk, row.version - 1) if moved else "",
        reason=key,
        title=event.title,
    )
    if due <= time.time() + conf.schedule.staged_s * 1.5:
        # Due soon: staged now; later ones are staged by the mover as they come near (its stager).
        transaction.on_commit(lambda: stage_now(klass, {row.pk: due}))
    return Scheduled(Outcome.SCHEDULED, moved, previous_sent, due)


def _pending_of(user_id):
    return ScheduledSend.objects.filter(user_id=user_id, state=PENDING).count()


def _reserve(kind, send_at, existing):
    """(when the send is due, whether it holds a reserved second): a reserving class's latest second of the kind's
    window with room, giving up ``existing``'s; Rejected when the window has none."""
    klass = kind.klass
    if klass not in RESERVING:
        return send_at, False
    rate = sluice_settings().schedule.classes[klass]
    earliest, latest = window_of(kind, send_at)
    seconds, available = staging.reserve(klass, latest, earliest, [_held(existing)], rate.slots_per_s)
    if not seconds:
        metrics.count(metrics.scheduled_field(klass, "rejected"), klass=klass)
        window = f"{_when(earliest)} to {_when(latest)}"
        hint = f"; the earliest second with room is {_when(available)}" if available else ""
        raise Rejected(
            f"no room in the {klass} pool's rate ({rate.slots_per_s} scheduled sends a second) from {window}{hint}",
            retry_after=1.0,
            available_at=available,
        )
    return due_in(seconds[0], send_at), True


def window_of(kind, send_at, now=None):
    """(earliest, latest): the seconds a reserving ``kind``'s send for ``send_at`` may take. They end at send_at's: a
    window of W seconds holds W seconds of the rate (0: send_at's own); and they start no earlier than this second,
    since a second gone by would publish its sends at once, all together, beside the ones due now."""
    latest = int(send_at)
    now = time.time() if now is None else now
    return max(latest - max(kind.schedule_window_s, 1) + 1, min(int(now), latest)), latest


def due_in(second, send_at):
    """When a send reserved in ``second`` is published: the second's start, or its send_at when the second is send_at's
    own (a send goes early only by its kind's window, never by the fraction of its second)."""
    return send_at if second >= int(send_at) else float(second)


def _write(existing, identity, klass, event, send_at, due, reserved):
    """Move ``existing`` if it is still pending (a conditional UPDATE: the mover may have taken it), else add a row;
    return (the row, moved, previous_sent)."""
    fields = {
        "klass": klass,
        "send_at": datetime_of(send_at),
        "due_at": datetime_of(due),
        "reserved": reserved,
        "payload": event.payload_json,
    }
    if existing is not None:
        from django.db.models import F

        moved = ScheduledSend.objects.filter(pk=existing.pk, state=PENDING).update(
            **fields, version=F("version") + 1, updated_at=datetime.now(UTC)
        )
        if moved:
            existing.refresh_from_db()
            return existing, True, False
    row = ScheduledSend.objects.create(**identity, **fields)
    # Moved a moment too late: the send it would have replaced is in its mover's hands, and goes out.
    being_sent = existing is not None or ScheduledSend.objects.filter(**identity, state=PUBLISHING).exists()
    return row, False, being_sent


def _held(row):
    """The second ``row`` holds (None: no row, or one that reserves nothing)."""
    return int(row.due_at.timestamp()) if row is not None and row.reserved else None


def give_back(klass, seconds, held):
    """The database refused a write: give the new ``seconds`` back, and take the ``held`` ones (the seconds the sends
    gave up, or None) again. Best effort: a second lost either way is found again when the mover stages its window."""
    try:
        staging.release(klass, seconds)
        for second in filter(None, held):
            staging.reserve(klass, second, second, [None], 10**6)
    except RedisError as exc:
        logger.warning("scheduling: reservations could not be given back: %s", type(exc).__name__)


def stage_now(klass, due):
    """Stage sends due soon ({row id: when}) for the mover now, rather than at its next staging."""
    try:
        staging.stage(klass, due)
    except RedisError as exc:
        # Its window's staging picks them up (the mover's stager): at worst they are staged a little later.
        logger.warning("scheduling: %d sends not staged now (%s); their window's staging will", len(due), exc)


def cancel_scheduled(kind, entity_id, *, users=None, key=None):
    """Cancel the pending sends of ``kind`` about ``entity_id``: every user's, or only those of ``users`` (users or
    their primary keys), with ``key`` (None: every key). Return how many were cancelled. A send the mover has taken
    already (it is being published) is not cancelled, nor counted."""
    found = ScheduledSend.objects.filter(kind=kind, entity_id=str(entity_id), state=PENDING)
    if key is not None:
        found = found.filter(key=key)
    if users is not None:
        User = get_user_model()
        found = found.filter(user_id__in=[u.pk if isinstance(u, User) else u for u in users])
    with transaction.atomic():
        rows = list(found.values_list("pk", "klass", "reserved", "due_at"))
        logged = list(found.values("pk", "user_id", "kind", "entity_id", "key", "klass", "version"))
        cancelled = ScheduledSend.objects.filter(pk__in=[r[0] for r in rows], state=PENDING).delete()[0]
        activity.write_many(
            {
                "user_id": row["user_id"],
                "outcome": activity_fields.CANCELLED,
                "kind": row["kind"],
                "entity_id": row["entity_id"],
                "notification_id": notification_id(row["pk"], row["version"]),
                "klass": row["klass"],
                "reason": row["key"],
            }
            for row in logged
        )
    try:
        release_rows(rows)
    except RedisError as exc:
        logger.warning("scheduling: %d cancelled sends' Redis part waits for the stager: %s", len(rows), exc)
    return cancelled


def release_rows(rows):
    """After cancelled rows ((pk, class, reserved, due_at) each) left the database: give back their reserved
    seconds, forget their staged ids, and count them."""
    by_class = {}
    for pk, klass, reserved, due_at in rows:
        ids, seconds = by_class.setdefault(klass, ([], []))
        ids.append(pk)
        if reserved:
            seconds.append(int(due_at.timestamp()))
    for klass, (ids, seconds) in by_class.items():
        metrics.count(metrics.scheduled_field(klass, "cancelled"), len(ids), klass=klass)
        staging.release(klass, seconds)
        staging.unstage(klass, ids)


def notification_id(row_id, version):
    """The id a scheduled send goes out with: the same for every publish of one version, so it is sent once."""
    return uuid.uuid5(NAMESPACE, f"scheduled:{row_id}:{version}").hex


NAMESPACE = uuid.UUID("1f7c7c3e-2f4a-4b54-8d2a-6c2b8e0f9a31")


def datetime_of(seconds):
    return datetime.fromtimestamp(seconds, UTC)


def _when(seconds):
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="seconds")
