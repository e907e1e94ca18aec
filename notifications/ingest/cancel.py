"""POST /api/notifications/cancel/: cancel a service's scheduled sends of one kind and entity, for every user or some.

Authenticated, rate-limited and scoped as POST /api/notifications/ is: a token cancels only kinds it may send, and
only in its service's namespace of entity ids (the one its scheduled sends were made in).
"""

import logging

from django.views.decorators.csrf import csrf_exempt

from notifications import exceptions

from .many import MAX_USERS
from .views import OUTAGE_RETRY_AFTER_S, OUTAGES, Refusal, _authenticate, _json, _namespaced, _rate_limit, _read_json
from .views import _refuse as refuse

logger = logging.getLogger("sluice.ingest")

FIELDS = ("kind", "entity_id", "key", "users")


@csrf_exempt  # Safe because only the Authorization header authenticates: a browser never sends it by itself.
def cancel(request):
    """Cancel pending scheduled sends; answer 200 {"cancelled": n} (see docs/ingest.md)."""
    from notifications import cancel_scheduled

    token = None
    try:
        if request.method != "POST":
            raise Refusal(405, "method_not_allowed", "use POST", {"Allow": "POST"})
        token = _authenticate(request)
        _rate_limit(token)
        body = _read_json(request)
        kind, users, key = _fields(body)
        if not token.allows(kind):
            raise Refusal(403, "kind_not_allowed", "this token may not send (nor cancel) that kind")
        entity_id = _namespaced(token, body["entity_id"])
        if not isinstance(entity_id, str):
            raise Refusal(400, "invalid_entity_id", "entity_id must be a non-empty string or an integer")
        cancelled = cancel_scheduled(kind, entity_id, users=users, key=key)
    except Refusal as refusal:
        return refuse(token, refusal)
    except OUTAGES:
        detail = "the notification service is temporarily unavailable; retry later"
        return refuse(token, Refusal(503, "unavailable", detail, {"Retry-After": str(OUTAGE_RETRY_AFTER_S)}))
    except exceptions.NotifyError as exc:
        return refuse(token, Refusal(400, "invalid_request", str(exc)))
    logger.info("ingest token=%s cancelled=%d", token.name, cancelled)
    return _json(200, {"cancelled": cancelled})


def _fields(body):
    """(kind, users or None, key or None) of a cancel request's body; a 400 naming what is wrong."""
    unknown = sorted(repr(f) for f in body if f not in FIELDS)
    if unknown:
        raise Refusal(400, "invalid_request", f"unknown field(s) {', '.join(unknown)}; the fields are {FIELDS}")
    missing = [f for f in ("kind", "entity_id") if f not in body]
    if missing:
        raise Refusal(400, "invalid_request", f"missing field(s): {', '.join(missing)}")
    kind, users, key = body["kind"], body.get("users"), body.get("key")
    if not isinstance(kind, str):
        raise Refusal(400, "invalid_request", "kind must be a string")
    if users is not None:
        if not isinstance(users, list) or not all(isinstance(u, (int, str)) and not isinstance(u, bool) for u in users):
            raise Refusal(400, "invalid_request", "users must be a list of user ids")
        if len(users) > MAX_USERS:
            raise Refusal(400, "invalid_request", f"users names {len(users)} users; the limit is {MAX_USERS}")
    if key is not None and not isinstance(key, str):
        raise Refusal(400, "invalid_request", "key must be a string")
    return kind, users, key
