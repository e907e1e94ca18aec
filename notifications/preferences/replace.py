"""Replace a user's preferences as a whole, all or nothing: what PUT /api/preferences/ and the preference page save.

The whole body is checked before anything is written: bad input is refused naming the field, a scope given twice
naming the row, and nothing is saved. The rows are then written in bulk and the user's Redis mirror once, in one
transaction. Each user may save PUT_BURST times at once and PUT_RATE_PER_S times a second after that.
"""

import math
from dataclasses import dataclass

from django.core.exceptions import ValidationError
from django.db import IntegrityError, OperationalError, transaction
from redis.exceptions import RedisError

from notifications import preferences
from notifications.json_api import BadRequest
from notifications.preferences.models import NotificationSettings, Preference
from pipeline.conf import sluice_settings
from pipeline.gates.token_bucket import take_from
from pipeline.redis import keys

FIELDS = {"preferences", "timezone", "quiet_hours", "cadence", "digest_at"}
ROW_FIELDS = {"kind", "category", "channel", "mode"}
# A settings page saves when a person clicks: ten at once, then one every five seconds, per user.
PUT_BURST = 10
PUT_RATE_PER_S = 0.2


class Refused(Exception):
    """Nothing was saved: the HTTP ``status``, its ``error`` and ``detail``, the ``field`` a 400 names (else None),
    and the response's ``headers``."""

    def __init__(self, status, error, detail, field=None, headers=None):
        super().__init__(detail)
        self.status, self.error, self.detail, self.field = status, error, detail, field
        self.headers = headers or {}

    def body(self):
        """The JSON answer's body."""
        named = {} if self.field is None else {"field": self.field}
        return {"error": self.error, **named, "detail": self.detail}


@dataclass(frozen=True)
class Replacement:
    """A checked body: the rows to write, and the settings row's fields."""

    rows: list
    settings: dict


def save(user_id, read):
    """Replace the user's choices, quiet hours and cadence with the body ``read()`` returns (PUT /api/preferences/'s
    shape, or BadRequest), all or nothing; Refused when nothing was saved. The body is read once the user's rate
    allows it."""
    try:
        wait = take_from(keys.preferences_rate(user_id), PUT_RATE_PER_S, PUT_BURST)
    except RedisError as exc:
        raise _unavailable(exc) from exc
    if wait:
        detail = f"at most {PUT_BURST} changes at once, then one every {1 / PUT_RATE_PER_S:g} s"
        raise Refused(429, "rate_limited", detail, headers={"Retry-After": str(math.ceil(wait))})
    try:
        replacement = checked(user_id, read())
    except BadRequest as exc:
        raise Refused(exc.status, exc.error, exc.detail, field=exc.field) from exc
    try:
        with transaction.atomic(), preferences.replacing(user_id):
            write(user_id, replacement)
    except RedisError as exc:
        raise _unavailable(exc) from exc
    except IntegrityError as exc:
        # Another request changed the same user's preferences at the same moment (the user row's lock keeps
        # PostgreSQL's in line; a database without row locks may still collide): nothing of this one was saved.
        raise Refused(409, "conflict", "changed by another request at the same time; retry") from exc
    except OperationalError as exc:
        raise Refused(503, "busy", "the database is busy; nothing was saved, retry") from exc


def _unavailable(exc):
    detail = f"Redis is unavailable ({type(exc).__name__}); nothing was saved, retry"
    return Refused(503, "unavailable", detail, headers={"Retry-After": "5"})


def most_rows():
    """How many distinct scopes a user may choose for: each kind, each category and every kind, each on each channel
    and on every channel. A body with more rows than this repeats one."""
    conf = sluice_settings()
    categories = {kind.category for kind in conf.kinds.values() if kind.category}
    return (len(conf.kinds) + len(categories) + 1) * (len(conf.channels) + 1)


def checked(user_id, body):
    """The Replacement ``body`` asks for; BadRequest naming the first field that is wrong."""
    rows = body.get("preferences", [])
    if not isinstance(rows, list):
        raise BadRequest("preferences", "must be a list of {kind, category, channel, mode}")
    if len(rows) > (limit := most_rows()):
        raise BadRequest("preferences", f"{len(rows)} rows; there are only {limit} scopes to choose for")
    seen, kept = {}, []
    for index, row in enumerate(rows):
        where = f"preferences[{index}]"
        if not isinstance(row, dict) or set(row) - ROW_FIELDS:
            raise BadRequest(where, "must be an object of kind, category, channel and mode")
        scope = tuple(row.get(name) or "" for name in ("kind", "category", "channel"))
        if not all(isinstance(value, str) for value in scope):
            raise BadRequest(where, "kind, category and channel must be strings")
        if scope in seen:
            raise BadRequest(where, f"the same kind, category and channel as preferences[{seen[scope]}]")
        seen[scope] = index
        if row.get("mode") is None:
            continue  # no choice: the row is forgotten
        choice = Preference(user_id=user_id, kind=scope[0], category=scope[1], channel=scope[2], mode=row["mode"])
        _checking(where, lambda choice=choice: (choice.clean_fields(exclude=["user"]), choice.clean()))
        kept.append(choice)
    quiet = body.get("quiet_hours")
    if quiet is not None and (not isinstance(quiet, dict) or set(quiet) != {"start", "end"}):
        raise BadRequest("quiet_hours", 'must be {"start": "HH:MM", "end": "HH:MM"} or null')
    settings = _checking("quiet_hours", lambda: _settings_fields(body, quiet))
    candidate = NotificationSettings(user_id=user_id, **settings)
    _checking("quiet_hours", lambda: (candidate.clean_fields(exclude=["user"]), candidate.clean()))
    return Replacement(rows=kept, settings=settings)


def _settings_fields(body, quiet):
    start, end = (quiet["start"], quiet["end"]) if quiet else (None, None)
    return {
        "timezone": body.get("timezone", "UTC"),
        "quiet_start": preferences.parse_time(start, "quiet_start"),
        "quiet_end": preferences.parse_time(end, "quiet_end"),
        "cadence": body.get("cadence", "immediate"),
        "digest_at": preferences.parse_time(body.get("digest_at"), "digest_at"),
    }


def write(user_id, replacement):
    """Write ``replacement`` in place of the user's rows and settings (inside the caller's transaction)."""
    from django.contrib.auth import get_user_model

    # One save of a user at a time: the next waits for this one's commit instead of colliding with its rows.
    list(get_user_model()._default_manager.select_for_update().filter(pk=user_id).values_list("pk", flat=True))
    Preference.objects.filter(user_id=user_id).delete()
    Preference.objects.bulk_create(replacement.rows)
    row = NotificationSettings.objects.filter(user_id=user_id).first() or NotificationSettings(user_id=user_id)
    for name, value in replacement.settings.items():
        setattr(row, name, value)
    row.save()


def _checking(where, check):
    try:
        return check()
    except ValidationError as exc:
        fields = getattr(exc, "message_dict", {"": exc.messages})
        field, messages = next(iter(fields.items()))
        renamed = {"timezone": "timezone", "digest_at": "digest_at", "cadence": "cadence"}
        name = renamed.get(field, f"{where}.{field}" if field else where)
        raise BadRequest(name, "; ".join(messages)) from None
