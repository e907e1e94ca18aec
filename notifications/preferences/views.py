"""GET and PUT /api/preferences/: the signed-in user's own preferences, for a host's front end.

Session authentication and Django's CSRF protection, as any page of the host: a PUT needs the CSRF token, whether or
not the host runs CsrfViewMiddleware (the view is csrf_protect'ed itself).
A PUT replaces the user's choices, quiet hours and cadence with the body, all or nothing. The whole body is checked
before anything is written: bad input gets a 400 naming the field, a scope given twice a 400 naming the row, and
nothing is saved. The rows are then written in bulk and the user's Redis mirror once, in one transaction. Each user
may PUT PUT_BURST times at once and PUT_RATE_PER_S times a second after that (429 past it).
"""

import math
from dataclasses import dataclass

from django.core.exceptions import ValidationError
from django.db import IntegrityError, OperationalError, transaction
from django.views.decorators.csrf import csrf_protect
from redis.exceptions import RedisError

from notifications import preferences
from notifications.json_api import BadRequest, invalid, read_object, respond, unauthorized, unavailable
from notifications.preferences.models import NotificationSettings, Preference
from pipeline.conf import sluice_settings
from pipeline.gates.token_bucket import take_from
from pipeline.redis import keys

BODY_LIMIT = 64 * 1024
FIELDS = {"preferences", "timezone", "quiet_hours", "cadence", "digest_at"}
ROW_FIELDS = {"kind", "category", "channel", "mode"}
# A settings page saves when a person clicks: ten at once, then one every five seconds, per user.
PUT_BURST = 10
PUT_RATE_PER_S = 0.2


@dataclass(frozen=True)
class Replacement:
    """A checked PUT body: the rows to write, and the settings row's fields."""

    rows: list
    settings: dict


@csrf_protect
def preferences_view(request):
    """GET: the user's preferences and what they mean per kind; PUT: replace them."""
    if not request.user.is_authenticated:
        return unauthorized()
    if request.method == "GET":
        return respond(200, preferences.get(request.user))
    if request.method != "PUT":
        return respond(405, {"error": "method_not_allowed", "detail": "use GET or PUT"}, {"Allow": "GET, PUT"})
    user_id = request.user.pk
    try:
        wait = take_from(keys.preferences_rate(user_id), PUT_RATE_PER_S, PUT_BURST)
    except RedisError as exc:
        return unavailable(exc, "nothing was saved, retry")
    if wait:
        detail = f"at most {PUT_BURST} changes at once, then one every {1 / PUT_RATE_PER_S:g} s"
        return respond(429, {"error": "rate_limited", "detail": detail}, {"Retry-After": str(math.ceil(wait))})
    try:
        replacement = _checked(user_id, _read(request))
    except BadRequest as exc:
        return invalid(exc)
    try:
        with transaction.atomic(), preferences.replacing(user_id):
            _write(user_id, replacement)
    except RedisError as exc:
        return unavailable(exc, "nothing was saved, retry")
    except IntegrityError:
        # Another request changed the same user's preferences at the same moment (the user row's lock keeps
        # PostgreSQL's in line; a database without row locks may still collide): nothing of this one was saved.
        return respond(409, {"error": "conflict", "detail": "changed by another request at the same time; retry"})
    except OperationalError:
        return respond(503, {"error": "busy", "detail": "the database is busy; nothing was saved, retry"})
    return respond(200, preferences.get(request.user))


def _read(request):
    body = read_object(request, BODY_LIMIT)
    unknown = set(body) - FIELDS
    if unknown:
        raise BadRequest(sorted(unknown)[0], f"unknown field; the fields are {sorted(FIELDS)}")
    return body


def most_rows():
    """How many distinct scopes a user may choose for: each kind, each category and every kind, each on each channel
    and on every channel. A body with more rows than this repeats one."""
    conf = sluice_settings()
    categories = {kind.category for kind in conf.kinds.values() if kind.category}
    return (len(conf.kinds) + len(categories) + 1) * (len(conf.channels) + 1)


def _checked(user_id, body):
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


def _write(user_id, replacement):
    from django.contrib.auth import get_user_model

    # One PUT of a user at a time: the next waits for this one's commit instead of colliding with its rows.
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
