"""GET /api/activity/: the activity log as JSON for the host's own support tools, staff with
sluice_notifications.view_activity only, paginated (newest first, a cursor to page on)."""

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.views.decorators.http import require_GET

from notifications.json_api import respond, unauthorized

from . import queries
from .admin import PERMISSION
from .models import ActivityEntry
from .words import Words, as_dict

DEFAULT_LIMIT = 100


def _bad(field, detail):
    return respond(400, {"error": "invalid", "field": field, "detail": detail})


@require_GET
def activity_view(request):
    """?user=<pk> (with kind, channel, outcome, since, limit, before) or ?notification=<id>: entries in words."""
    if not request.user.is_authenticated:
        return unauthorized()
    if not (request.user.is_staff and request.user.has_perm(PERMISSION)):
        return respond(403, {"error": "forbidden", "detail": f"needs the permission {PERMISSION}"})
    query = request.GET
    try:
        limit = int(query.get("limit", DEFAULT_LIMIT))
    except ValueError:
        limit = 0
    if not 1 <= limit <= queries.MAX_LIMIT:
        return _bad("limit", f"must be an integer from 1 to {queries.MAX_LIMIT}")
    if query.get("notification"):
        own, carried, carriers = queries.steps(query["notification"][:100])
        return respond(
            200,
            {
                "entries": _said(own),
                "carried": _said(carried),
                "carried_by": [digest.notification_id for digest in carriers],
            },
        )
    if not query.get("user"):
        return _bad("user", "give user=<pk> or notification=<id>")
    user_model = get_user_model()
    try:
        user = user_model._default_manager.get(pk=user_model._meta.pk.to_python(query["user"]))
    except (ValidationError, ValueError, user_model.DoesNotExist):
        return respond(404, {"error": "not_found", "field": "user", "detail": "no such user"})
    try:
        since = queries.parse_since(query["since"]) if query.get("since") else None
    except ValueError as exc:
        return _bad("since", str(exc))
    before = None
    if query.get("before"):
        cursor = ActivityEntry.objects.filter(pk=_int(query["before"]), user=user).values_list("at", "pk").first()
        if cursor is None:
            return _bad("before", "not an entry of this user (use the previous page's next)")
        before = cursor
    entries = queries.timeline(
        user.pk,
        kind=query.get("kind", ""),
        channel=query.get("channel", ""),
        outcome=query.get("outcome", ""),
        since=since,
        limit=limit,
        before=before,
    )
    words = Words(user)
    body = {
        "entries": [as_dict(entry, words.say(entry)) for entry in entries],
        "next": entries[-1].pk if len(entries) == limit else None,
    }
    return respond(200, body)


def _said(entries):
    cache = {}
    out = []
    for entry in entries:
        words = cache.get(entry.user_id) or cache.setdefault(entry.user_id, Words(entry.user))
        out.append(as_dict(entry, words.say(entry)))
    return out


def _int(text):
    try:
        return int(text)
    except ValueError:
        return None
