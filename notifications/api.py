"""notify(), notify_on_commit() and notify_many(): validate an event completely, then publish it (or schedule it) or
raise."""

import json
import os
import re
import uuid

from django.contrib.auth import get_user_model
from django.db import transaction

from pipeline.activity_fields import title_of
from pipeline.admission.event import Event
from pipeline.conf import sluice_settings
from pipeline.redis import keys

from .exceptions import (
    InvalidEntityId,
    InvalidIdempotencyKey,
    InvalidPayload,
    InvalidSchedule,
    PayloadTooLarge,
    UnknownUser,
)
from .kinds import get_kind
from .policy import publish, publish_event, publish_scheduled
from .scheduling.api import check_key, send_at_of

# Far deeper than any notification needs, and far below the interpreter's recursion limit (1000).
MAX_PAYLOAD_DEPTH = 64
# The longest idempotency key (Stripe's limit too): room for any UUID or request id a client makes.
MAX_IDEMPOTENCY_KEY_LENGTH = 255
# The scope of notify()'s keys; each ingest service has its own ("ingest:<service>"), so callers never collide.
NOTIFY_SCOPE = "notify"


def notify(user, kind, *, entity_id, payload=None, idempotency_key=None, send_at=None, key=None):
    """Send a notification of ``kind`` about ``entity_id`` to ``user`` (a User or its pk).

    Returns an Outcome: ACCEPTED (queued), or, when the class queue is full, FOLDED (routine, into the
    digest), COLLAPSED (background, latest state kept) or DEFERRED (routine for a user who opted out
    of digests: waits in a bounded overflow). A critical event that finds no room within its wait
    budget raises Rejected, as does a deferred one whose overflow is full too. Bad input raises a
    NotifyError subclass, and then nothing is published.

    With ``idempotency_key`` (a string of 1-255 characters, no control characters), a second call with the
    same key within SLUICE_IDEMPOTENCY_TTL_S returns the first call's Outcome and publishes nothing. A call that
    raised (Rejected, Unavailable, bad input) recorded nothing: its retry is decided afresh.

    With ``send_at`` (an aware datetime, or Unix seconds; at most SLUICE_SCHEDULE["horizon_days"] ahead), nothing
    is published now: it returns SCHEDULED, and the send goes out at its time (notifications.scheduling), decided then
    by the user's choices of that time. The same user, kind, entity and ``key`` again moves it; cancel_scheduled()
    cancels it. A critical kind's send finds room in its pool's rate when it is scheduled, or raises Rejected now.
    """
    event = _validate(user, kind, entity_id, payload, idempotency_key, NOTIFY_SCOPE)
    if send_at is None:
        _no_key_without_time(key)
        return publish_event(event)
    return publish_scheduled(event, send_at_of(send_at), check_key(key)).outcome


def notify_on_commit(user, kind, *, entity_id, payload=None, using=None, idempotency_key=None, send_at=None, key=None):
    """Validate now, and publish (or schedule, with ``send_at``) only if the surrounding transaction commits.

    Validation errors raise here. A Rejected at commit time propagates from the commit, so the
    caller still sees it. ``idempotency_key`` is notify()'s, in the same scope.
    """
    event = _validate(user, kind, entity_id, payload, idempotency_key, NOTIFY_SCOPE)
    if send_at is None:
        _no_key_without_time(key)
        transaction.on_commit(lambda: publish_event(event), using=using)
        return
    when, key = send_at_of(send_at), check_key(key)
    transaction.on_commit(lambda: publish_scheduled(event, when, key), using=using)


def notify_in_scope(scope, user, kind, *, entity_id, payload=None, idempotency_key=None, send_at=None, key=None):
    """notify() for a caller with idempotency keys of its own (ingest: one scope per service); return the
    policy's Published: the Outcome, and whether it was a recorded one replayed (for a scheduled send, the
    scheduling's Scheduled: moved, previous_sent)."""
    event = _validate(user, kind, entity_id, payload, idempotency_key, scope)
    if send_at is None:
        _no_key_without_time(key)
        return publish(event)
    return publish_scheduled(event, send_at_of(send_at), check_key(key))


def notify_many(users, kind, *, entity_id, payload=None, idempotency_key=None, send_at=None, key=None):
    """notify() for many users at once: ``users`` are users, their primary keys, or a QuerySet of users (read in
    chunks). Each user's event is decided exactly as notify() decides it (their choices, quiet hours, cadence,
    throttle, the bound, the fold), one round trip per chunk of users; return a Fanout (notifications.fanout):
    ``counts`` by Outcome, the users ``rejected`` (a critical kind with no room within its wait_ms for the whole
    call; ``retry_after``), the ``unknown`` ones. Bad input (the kind, the entity, the payload, the key, the time, a
    user that is neither a user nor a primary key) raises before anything is published.

    ``idempotency_key`` applies per user: a repeat with the same key skips the users it admitted. With ``send_at``
    every user's send is scheduled, or moved, as notify() schedules one."""
    return notify_many_in_scope(
        NOTIFY_SCOPE,
        users,
        kind,
        entity_id=entity_id,
        payload=payload,
        idempotency_key=idempotency_key,
        send_at=send_at,
        key=key,
    )


def notify_many_in_scope(
    scope, users, kind, *, entity_id, payload=None, idempotency_key=None, send_at=None, key=None, reveal=True
):
    """notify_many() for a caller with idempotency keys of its own (ingest: one scope per service); ``reveal`` False
    answers an unknown user as accepted, as ingest answers a token that may not learn who exists."""
    from .fanout import fan_out

    template = _validate(None, kind, entity_id, payload, None, scope, unknown_user=True)
    idempotency = None if idempotency_key is None else (scope, check_idempotency_key(idempotency_key))
    if send_at is None:
        _no_key_without_time(key)
        return fan_out(template, users, reveal, idempotency=idempotency)
    when, key = send_at_of(send_at), check_key(key)
    return fan_out(template, users, reveal, send_at=when, key=key, idempotency=idempotency)


def schedule_of(send_at, key):
    """(when, key) of a call's ``send_at`` and ``key`` as notify() checks them: (None, None) without a time; raise
    InvalidSchedule otherwise."""
    if send_at is None:
        _no_key_without_time(key)
        return None, None
    return send_at_of(send_at), check_key(key)


def _no_key_without_time(key):
    if key is not None:
        raise InvalidSchedule("key names a scheduled send: it needs send_at")


def answer_unknown_user(scope, kind, *, entity_id, payload=None, idempotency_key=None, send_at=None, key=None):
    """What notify_in_scope() comes to for a user id that does not exist, for a caller who may not learn so (ingest,
    a token without reveal): the event checked as any other, nothing published, and its idempotency key recorded
    and replayed exactly as a real user's event records it, in one round trip to the class's Redis whether it has a
    key or not. Return the policy's Published (ACCEPTED, or the recorded outcome replayed)."""
    event = _validate(None, kind, entity_id, payload, idempotency_key, scope, unknown_user=True)
    if send_at is not None:
        # Refused as a real user's would be; nothing is scheduled.
        send_at_of(send_at)
        check_key(key)
    else:
        _no_key_without_time(key)
    return publish(event)


# What an entity id and an idempotency key must not hold: control characters (C1 too, for a key) and lone
# surrogates. A compiled class scans in C: notify() checks every entity id, and a loop over its characters in Python
# was a tenth of notify()'s own CPU.
_ENTITY_REFUSED = re.compile("[\x00-\x1f\x7f\ud800-\udfff]")
_KEY_REFUSED = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
# U+0000 in a payload's string, a key's included, as json.dumps writes it: "\u0000" after an even run of backslashes
# (after an odd one it is a backslash written out, then "u0000"). PostgreSQL stores neither the character in text nor
# the escape in jsonb, so the inbox's write of such a payload could only fail.
_PAYLOAD_NUL = re.compile(r"(?<!\\)(?:\\\\)*\\u0000")


def check_idempotency_key(key, name="idempotency_key"):
    """``key`` if it is a usable idempotency key, else raise InvalidIdempotencyKey naming ``name``."""
    if not isinstance(key, str):
        raise InvalidIdempotencyKey(f"{name} must be a string, got {type(key).__name__}")
    if not key:
        raise InvalidIdempotencyKey(f"{name} must not be empty")
    if len(key) > MAX_IDEMPOTENCY_KEY_LENGTH:
        raise InvalidIdempotencyKey(f"{name} is {len(key)} characters; the limit is {MAX_IDEMPOTENCY_KEY_LENGTH}")
    if _KEY_REFUSED.search(key):
        raise InvalidIdempotencyKey(f"{name} must not contain control characters or lone surrogates")
    return key


def _validate(user, kind, entity_id, payload, idempotency_key=None, scope=NOTIFY_SCOPE, unknown_user=False):
    conf = sluice_settings()
    kind_obj = get_kind(kind)
    entity_id = _entity_id(entity_id, conf.max_entity_id_length)
    payload_json = _payload_json(payload, conf.max_payload_bytes)
    idempotency = None
    if idempotency_key is not None:
        idempotency = keys.idempotency(scope, check_idempotency_key(idempotency_key))
    user_id = None if unknown_user else _user_id(user)
    # A random id as uuid4().hex spells it, at a third of its cost: notify() makes one a call.
    notification_id = os.urandom(16).hex()
    return Event(
        kind_obj,
        notification_id,
        user_id,
        entity_id,
        payload_json,
        idempotency,
        unknown_user=unknown_user,
        title=title_of(payload),
    )


def _entity_id(entity_id, limit):
    if isinstance(entity_id, int) and not isinstance(entity_id, bool):
        try:
            entity_id = str(entity_id)
        except ValueError:  # over Python's int-to-str digit limit (4300), so far over any length limit
            raise InvalidEntityId(
                f"entity_id is an integer too large to convert; the limit is {limit} characters"
            ) from None
    if not isinstance(entity_id, str):
        raise InvalidEntityId(f"entity_id must be a string, got {type(entity_id).__name__}")
    if not entity_id.strip():
        raise InvalidEntityId("entity_id must not be empty")
    if len(entity_id) > limit:
        raise InvalidEntityId(f"entity_id is {len(entity_id)} characters; the limit is {limit}")
    if _ENTITY_REFUSED.search(entity_id):
        raise InvalidEntityId("entity_id must not contain control characters or lone surrogates")
    return entity_id


def _payload_json(payload, limit):
    if payload is None:
        payload = {}
    if not isinstance(payload, dict):
        raise InvalidPayload(f"payload must be a dict, got {type(payload).__name__}")
    try:
        text = json.dumps(payload, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError, RecursionError) as exc:
        raise InvalidPayload(f"payload is not JSON-serialisable: {exc}") from None
    if "\\u0000" in text and _PAYLOAD_NUL.search(text):
        raise InvalidPayload("payload must not contain U+0000 (a NUL character), in a value or a key")
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidPayload("payload contains text that is not valid Unicode (a lone surrogate)") from None
    if size > limit:
        raise PayloadTooLarge(f"payload is {size} bytes as JSON; SLUICE_MAX_PAYLOAD_BYTES is {limit}")
    _check_depth(payload, MAX_PAYLOAD_DEPTH)
    return text


def _check_depth(payload, limit):
    # json.dumps here and json.loads in the worker recurse, so without a bound of its own whether a deep payload
    # passes depends on how deep each caller's stack already is: one accepted here could fail to decode there.
    stack = [(payload, 1)]
    while stack:
        value, depth = stack.pop()
        if depth > limit:
            raise InvalidPayload(f"payload is nested more than {limit} levels deep")
        children = value.values() if isinstance(value, dict) else value
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list, tuple)))


def _user_id(user):
    User = get_user_model()
    if isinstance(user, User):
        if user.pk is None:
            raise UnknownUser("user has no primary key: save it before notifying it")
        return _json_pk(user.pk)
    if isinstance(user, bool) or not isinstance(user, (int, str, uuid.UUID)):
        raise UnknownUser(f"user must be a {User.__name__} or its primary key, got {type(user).__name__}")
    try:
        exists = User._default_manager.filter(pk=user).exists()
    except (ValueError, TypeError):
        exists = False
    if not exists:
        raise UnknownUser(f"no {User.__name__} with primary key {user!r}")
    return _json_pk(User._meta.pk.to_python(user))


def _json_pk(pk):
    return pk if isinstance(pk, int) else str(pk)
