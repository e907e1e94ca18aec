"""GET and PUT /api/preferences/: the signed-in user's own preferences, for a host's front end.

Session authentication and Django's CSRF protection, as any page of the host: a PUT needs the CSRF token, whether or
not the host runs CsrfViewMiddleware (the view is csrf_protect'ed itself).
A PUT replaces the user's choices, quiet hours and cadence with the body, all or nothing (notifications.preferences.
replace, which the preference page saves through too): bad input gets a 400 naming the field, a scope given twice a
400 naming the row, and nothing is saved. Each user may PUT PUT_BURST times at once and PUT_RATE_PER_S times a second
after that (429 past it).
"""

from django.views.decorators.csrf import csrf_protect

from notifications import preferences
from notifications.json_api import BadRequest, read_object, respond, unauthorized

from .replace import FIELDS, PUT_BURST, PUT_RATE_PER_S, Refused, most_rows, save

__all__ = ["BODY_LIMIT", "PUT_BURST", "PUT_RATE_PER_S", "most_rows", "preferences_view"]

BODY_LIMIT = 64 * 1024


@csrf_protect
def preferences_view(request):
    """GET: the user's preferences and what they mean per kind; PUT: replace them."""
    if not request.user.is_authenticated:
        return unauthorized()
    if request.method == "GET":
        return respond(200, preferences.get(request.user))
    if request.method != "PUT":
        return respond(405, {"error": "method_not_allowed", "detail": "use GET or PUT"}, {"Allow": "GET, PUT"})
    try:
        save(request.user.pk, lambda: _read(request))
    except Refused as exc:
        return respond(exc.status, exc.body(), exc.headers)
    return respond(200, preferences.get(request.user))


def _read(request):
    body = read_object(request, BODY_LIMIT)
    unknown = set(body) - FIELDS
    if unknown:
        raise BadRequest(sorted(unknown)[0], f"unknown field; the fields are {sorted(FIELDS)}")
    return body
