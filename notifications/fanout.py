"""notify_many(): one event for many users, each decided exactly as notify() decides it, one round trip per chunk.

The kind, entity, payload and options are validated once; the users are read in chunks of wire.MAX_BATCH (a
QuerySet by its primary keys, never all in memory), each chunk checked against the user table in one query and
admitted in one Lua step (pipeline.admission.runner.admit_many). A critical kind's users that find no room wait
together, at most the class's wait_ms for the whole call (as one notify() would), pushed in order as room frees; the
rest are rejected by name. With send_at, every user's send is scheduled (or moved) as notify() schedules one.
"""

import logging
import os
import time
import uuid
from dataclasses import dataclass, field

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db.models import QuerySet

from pipeline import metrics
from pipeline.activity_fields import ACCEPTED as LOG_ACCEPTED
from pipeline.activity_fields import REJECTED as LOG_REJECTED
from pipeline.admission import wire
from pipeline.admission.bounded_push import log_waited, opens_burst, push_many
from pipeline.admission.event import Event, key_ttl
from pipeline.admission.idempotency import record_key
from pipeline.admission.runner import admit_many
from pipeline.conf import sluice_settings
from pipeline.redis import keys

from .exceptions import UnknownUser
from .outcome import Outcome
from .policy import BURST_WINDOW_S, FIRST_POLL_S, MAX_POLL_S, OUTCOMES, _unavailable, room_in

logger = logging.getLogger("sluice.admission")

#: What admission answers for a user who could not be admitted now (rejected by name, never silently).
REFUSED = (wire.FULL, wire.CEILING, wire.OVERFLOW_FULL, wire.STORE_FULL)


@dataclass
class Fanout:
    """What notify_many() did: ``counts`` maps each Outcome to how many users got it (a user's key replayed counts
    as its first outcome, and in ``replayed`` too); ``rejected`` lists the users not admitted (a critical kind with no
    room within its wait, ``retry_after`` seconds until it has; an overflow or the fold store full; a scheduled
    critical send with no room in its window, ``available_at`` the earliest second with room); ``unknown`` the users
    no user has (nothing sent to them); ``failed`` the users admission could not decide (their preferences' mirror
    unreadable: logged); ``schedule_full`` the users who have SLUICE_SCHEDULE["max_per_user"] sends scheduled;
    ``moved`` how many scheduled sends were moved rather than added, ``previous_sent`` how many were added beside a
    send of theirs the mover was publishing already (that one goes out too)."""

    counts: dict = field(default_factory=dict)
    rejected: list = field(default_factory=list)
    retry_after: float | None = None
    unknown: list = field(default_factory=list)
    failed: list = field(default_factory=list)
    replayed: int = 0
    schedule_full: list = field(default_factory=list)
    moved: int = 0
    previous_sent: int = 0
    available_at: float | None = None

    @property
    def users(self):
        """How many users the call named (each once)."""
        named = sum(self.counts.values())
        return named + len(self.rejected) + len(self.unknown) + len(self.failed) + len(self.schedule_full)

    def add(self, outcome, n=1):
        self.counts[outcome] = self.counts.get(outcome, 0) + n


def fan_out(template, users, reveal=True, send_at=None, key="", idempotency=None):
    """Admit ``template`` (a validated Event, its user left out) for each of ``users``; return a Fanout. ``idempotency``
    is the caller's key scope and key, (scope, key), applied per user. ``reveal`` False counts an unknown user as
    accepted (and records its key), as ingest answers a token that may not learn who exists."""
    klass = template.kind.klass
    # What admission's step counts in sluice_fanout_users_total itself: the users it took, by outcome.
    tally, counted = metrics.fanout_field(klass, ""), {}
    result, waiting = Fanout(), []
    with _unavailable(klass):
        for chunk in _chunks(users):
            known, unknown = _known(chunk)
            _unknown(template, unknown, result, reveal, idempotency)
            events = [_event(template, user, idempotency) for user in known]
            if send_at is not None:
                from .scheduling.many import schedule_many

                schedule_many(events, send_at, key, result)
                continue
            for event, done in zip(events, admit_many(events, tally), strict=True):
                _tally(result, event, done, waiting, counted)
        if waiting:
            _wait_for_room(klass, waiting, result)
    _count(klass, result, counted)
    return result


def _chunks(users):
    """The users' primary keys (or User objects), each once, in chunks of wire.MAX_BATCH; a QuerySet read in chunks."""
    User = get_user_model()
    if isinstance(users, QuerySet):
        if not issubclass(users.model, User):
            raise UnknownUser(f"users is a QuerySet of {users.model.__name__}, not of {User.__name__}")
        pks = users.order_by().values_list("pk", flat=True).distinct().iterator(chunk_size=wire.MAX_BATCH)
        chunk = []
        for pk in pks:
            chunk.append(_Known(pk))
            if len(chunk) == wire.MAX_BATCH:
                yield chunk
                chunk = []
        if chunk:
            yield chunk
        return
    listed = _listed(users, User)
    for start in range(0, len(listed), wire.MAX_BATCH):
        yield listed[start : start + wire.MAX_BATCH]


class _Known:
    """A primary key read from the user table itself (a QuerySet's): no need to ask whether it exists."""

    __slots__ = ("pk",)

    def __init__(self, pk):
        self.pk = pk


def _listed(users, User):
    """``users`` (users or primary keys, an iterable that is not a string) checked by type and each kept once, in
    order; UnknownUser, before anything is sent, naming the first that is neither."""
    if isinstance(users, (str, bytes)) or not hasattr(users, "__iter__"):
        raise UnknownUser(f"users must be users, their primary keys or a QuerySet, got {type(users).__name__}")
    seen, listed = set(), []
    for user in users:
        if isinstance(user, User):
            ident = ("pk", str(user.pk)) if user.pk is not None else ("unsaved", id(user))
        elif isinstance(user, bool) or not isinstance(user, (int, str, uuid.UUID)):
            raise UnknownUser(f"users must be {User.__name__}s or their primary keys, got a {type(user).__name__}")
        else:
            ident = ("pk", str(user))
        if ident not in seen:
            seen.add(ident)
            listed.append(user)
    return listed


def _known(chunk):
    """(the chunk's users who exist, as JSON-ready pks; those who do not, as given), in order: one query for the bare
    primary keys among them."""
    User = get_user_model()
    to_python = User._meta.pk.to_python
    read = []
    for user in chunk:
        if isinstance(user, (_Known, User)):
            read.append(user.pk)
            continue
        try:
            read.append(to_python(user))
        except (ValueError, TypeError, ValidationError):  # a pk the field cannot read is no user's
            read.append(None)
    bare = [pk for user, pk in zip(chunk, read, strict=True) if pk is not None and not isinstance(user, (_Known, User))]
    found = set(User._default_manager.filter(pk__in=bare).values_list("pk", flat=True)) if bare else set()
    known, unknown = [], []
    for user, pk in zip(chunk, read, strict=True):
        exists = pk is not None and (isinstance(user, (_Known, User)) or pk in found)
        (known if exists else unknown).append(_json_pk(pk) if exists else user)
    return known, unknown


def _json_pk(pk):
    return pk if isinstance(pk, int) else str(pk)


def _event(template, user_id, idempotency):
    scoped = _scoped(idempotency, user_id)
    return Event(
        template.kind,
        os.urandom(16).hex(),
        user_id,
        template.entity_id,
        template.payload_json,
        scoped,
        title=template.title,
    )


def _scoped(idempotency, user):
    """The caller's key for one user, or None: NUL cannot be in a key (notifications.api checks), so no two users'
    collide, nor one user's with a notify() call's."""
    if idempotency is None:
        return None
    scope, key = idempotency
    return keys.idempotency(scope, f"{key}\0{user}")


def _unknown(template, unknown, result, reveal, idempotency):
    """Users no user has: named, or (``reveal`` False) answered as accepted, their keys recorded as a real user's."""
    if not unknown:
        return
    if reveal:
        result.unknown.extend(unknown)
        return
    for user in unknown:
        scoped = _scoped(idempotency, user)
        recorded = scoped and record_key(template.kind.klass, scoped, wire.ACCEPTED, key_ttl(template))
        result.add(Outcome(recorded) if recorded else Outcome.ACCEPTED)
        result.replayed += bool(recorded)


def _tally(result, event, done, waiting, counted):
    if done.outcome in OUTCOMES:
        result.add(OUTCOMES[done.outcome])
        result.replayed += done.replayed
        counted[done.outcome] = counted.get(done.outcome, 0) + 1
    elif done.outcome == wire.FULL:
        waiting.append((event, done.message))
    elif done.outcome in REFUSED:
        result.rejected.append(event.user_id)
    else:
        result.failed.append(event.user_id)


def _wait_for_room(klass, waiting, result):
    """Push the waiting critical events in order as room frees, for at most the class's wait_ms in all; reject the
    rest by name, with how long the queue needs to free room for them."""
    queue = sluice_settings().queues[klass]
    deadline = time.monotonic() + queue.wait_ms / 1000
    pause = FIRST_POLL_S
    while waiting and (left := deadline - time.monotonic()) > 0:
        time.sleep(min(pause, left))
        pause = min(pause * 2, MAX_POLL_S)
        batch = waiting[: wire.MAX_BATCH]
        pushed = push_many(batch)
        taken = 0
        for done in pushed:
            if done.outcome not in OUTCOMES:
                break
            result.add(OUTCOMES[done.outcome])
            result.replayed += done.replayed
            taken += 1
        log_waited(
            [event for (event, _m), done in zip(batch[:taken], pushed[:taken], strict=True) if not done.replayed],
            LOG_ACCEPTED,
        )
        waiting = waiting[taken:]
        if taken:
            pause = FIRST_POLL_S  # room is freeing: look again soon
    if waiting:
        result.rejected.extend(event.user_id for event, _message in waiting)
        current, result.retry_after = room_in(klass, queue, len(waiting))
        log_waited([event for event, _message in waiting], LOG_REJECTED, f"{result.retry_after:g}")
        metrics.count(metrics.notifications_field(klass, "rejected"), len(waiting), klass=klass)
        if opens_burst(klass, "fanout", BURST_WINDOW_S):
            logger.error(
                "%s queue %r full (%d of %d) for the whole wait budget: %d users of a notify_many rejected; later "
                "rejections in this burst are counted in sluice_notifications_total, not logged",
                klass,
                queue.name,
                current,
                queue.capacity,
                len(waiting),
            )


def _count(klass, result, counted):
    """sluice_fanout_users_total{class,outcome}: every user named, by what became of them (less what admission's step
    ``counted`` itself)."""
    counts = {str(outcome): n - counted.get(str(outcome), 0) for outcome, n in result.counts.items()}
    counts.update(
        rejected=len(result.rejected),
        unknown=len(result.unknown),
        failed=len(result.failed),
        schedule_full=len(result.schedule_full),
    )
    metrics.count_many({metrics.fanout_field(klass, name): n for name, n in counts.items() if n}, klass=klass)
