"""GET and PUT /api/preferences/: the signed-in user's own preferences, for a host's front end.

Session authentication and Django's CSRF protection, as any page of the host: a PUT needs the CSRF token.
A PUT replaces the user's choices, quiet hours and cadence with the body, all or nothing; bad input gets a
400 naming the field, nothing is saved.
"""

import json

from django.core.exceptions import ValidationError
from django.db import transaction
from django.http import JsonResponse

from . import preferences
from .models import Preference

BODY_LIMIT = 64 * 1024
FIELDS = {"preferences", "timezone", "quiet_hours", "cadence", "digest_at"}


class BadRequest(Exception):
    """A 400: the field it names, and why."""

    def __init__(self, field, detail):
        super().__init__(detail)
        self.field, self.detail = field, detail


def preferences_view(request):
    """GET: the user's preferences and what they mean per kind; PUT: replace them."""
    if not request.user.is_authenticated:
        return _json(401, {"error": "unauthorized", "detail": "sign in first"})
    if request.method == "GET":
        return _json(200, preferences.get(request.user))
    if request.method != "PUT":
        return _json(405, {"error": "method_not_allowed", "detail": "use GET or PUT"}, {"Allow": "GET, PUT"})
    try:
        body = _read(request)
        with transaction.atomic():
            _replace(request.user, body)
    except BadRequest as exc:
        return _json(400, {"error": "invalid", "field": exc.field, "detail": exc.detail})
    return _json(200, preferences.get(request.user))


def _read(request):
    if request.content_type != "application/json":
        raise BadRequest("", "send JSON, as Content-Type: application/json")
    if len(request.body) > BODY_LIMIT:
        raise BadRequest("", f"the body is over {BODY_LIMIT} bytes")
    try:
        body = json.loads(request.body)
    except ValueError as exc:
        raise BadRequest("", f"the body is not valid JSON: {exc}") from None
    if not isinstance(body, dict):
        raise BadRequest("", "the body must be a JSON object")
    unknown = set(body) - FIELDS
    if unknown:
        raise BadRequest(sorted(unknown)[0], f"unknown field; the fields are {sorted(FIELDS)}")
    return body


def _replace(user, body):
    rows = body.get("preferences", [])
    if not isinstance(rows, list):
        raise BadRequest("preferences", "must be a list of {kind, category, channel, mode}")
    Preference.objects.filter(user=user).delete()
    for index, row in enumerate(rows):
        if not isinstance(row, dict) or set(row) - {"kind", "category", "channel", "mode"}:
            raise BadRequest(f"preferences[{index}]", "must be an object of kind, category, channel and mode")
        values = {name: row.get(name) or "" for name in ("kind", "category", "channel")}
        if not all(isinstance(value, str) for value in values.values()):
            raise BadRequest(f"preferences[{index}]", "kind, category and channel must be strings")
        _saving(f"preferences[{index}]", preferences.set, user, mode=row.get("mode"), **values)
    quiet = body.get("quiet_hours")
    timezone = body.get("timezone", "UTC")
    if quiet is not None and (not isinstance(quiet, dict) or set(quiet) != {"start", "end"}):
        raise BadRequest("quiet_hours", 'must be {"start": "HH:MM", "end": "HH:MM"} or null')
    start, end = (quiet["start"], quiet["end"]) if quiet else (None, None)
    _saving("quiet_hours", preferences.set_quiet_hours, user, timezone, start, end)
    _saving("cadence", preferences.set_cadence, user, body.get("cadence", "immediate"), body.get("digest_at"))


def _saving(where, save, *args, **kwargs):
    try:
        return save(*args, **kwargs)
    except ValidationError as exc:
        fields = getattr(exc, "message_dict", {"": exc.messages})
        field, messages = next(iter(fields.items()))
        name = {"timezone": "timezone", "digest_at": "digest_at"}.get(field, f"{where}.{field}" if field else where)
        raise BadRequest(name, "; ".join(messages)) from None


def _json(status, body, headers=None):
    response = JsonResponse(body, status=status)
    for name, value in (headers or {}).items():
        response[name] = value
    return response
