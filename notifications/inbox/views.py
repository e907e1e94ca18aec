"""The inbox API for the host's pages: list, unread count, mark read, archive, open; the signed-in user's own items.

Session authentication and Django's CSRF protection, as /api/preferences/: a POST needs the CSRF token, whether or
not the host runs CsrfViewMiddleware (each POST view is csrf_protect'ed itself). Input is bounded (a body of at most
BODY_LIMIT bytes, at most MAX_IDS ids, pages of at most MAX_PAGE items) and each user may change their inbox
CHANGE_BURST times at once and CHANGE_RATE_PER_S times a second after that (429 past it).

Opening an item (GET /api/inbox/<id>/open/, where the bell links each item) marks it read and redirects to the
item's own stored link, never to a target the request names: the page it lands on already counts it read.

The unread count is what every page load and every poll asks: it reads the user's id from the session and the
count from Redis (notifications.inbox.unread), never the user row nor an item, and answers 304 to a poll whose
If-None-Match still holds.
"""

import logging
import math

from django.contrib.auth import SESSION_KEY, get_user_model
from django.db.models import Q
from django.http import HttpResponse, HttpResponseRedirect
from django.utils import timezone
from django.views.decorators.csrf import csrf_protect
from django.views.decorators.http import require_GET, require_POST
from redis.exceptions import RedisError

from notifications.activity import record as activity
from notifications.inbox.models import InboxItem
from notifications.json_api import BadRequest, invalid, query, read_object, respond, unauthorized, unavailable
from pipeline import activity_fields, metrics
from pipeline.gates.token_bucket import take_from
from pipeline.redis import keys

from . import unread

BODY_LIMIT = 16 * 1024
MAX_IDS = 200
MAX_PAGE = 100
DEFAULT_PAGE = 20
# A person clicks: twenty changes at once, then five a second.
CHANGE_BURST = 20
CHANGE_RATE_PER_S = 5

logger = logging.getLogger("sluice.inbox")


@require_GET
def unread_count(request):
    """GET /api/inbox/unread/: {"unread": n}, with an ETag; 304 when the poll's If-None-Match still holds."""
    user_id = session_user_id(request)
    if user_id is None:
        return unauthorized()
    try:
        count, version = unread.read(user_id)
    except RedisError as exc:
        return unavailable(exc)
    etag = f'"{version}.{count}"'
    headers = {"ETag": etag, "Cache-Control": "private, no-cache"}
    if etag in request.headers.get("If-None-Match", ""):
        response = HttpResponse(status=304)
        for name, value in headers.items():
            response[name] = value
        return response
    return respond(200, {"unread": count}, headers)


def session_user_id(request):
    """The signed-in user's id from the session, without loading the user (the poll's one lookup is the session's);
    None when nobody is signed in."""
    raw = request.session.get(SESSION_KEY)
    if raw is None:
        return None
    try:
        return get_user_model()._meta.pk.to_python(raw)
    except Exception:  # noqa: BLE001 - a session of another user model: nobody signed in here
        return None


@require_GET
def items(request):
    """GET /api/inbox/?unread=1&kind=<kind>&before=<id>&limit=<n>: the user's items, newest first, not archived;
    "next" is the ``before`` of the next page (null on the last)."""
    if not request.user.is_authenticated:
        return unauthorized()
    try:
        limit = _int(query(request, "limit") or DEFAULT_PAGE, "limit", 1, MAX_PAGE)
        before = query(request, "before")
        before = None if before in (None, "") else _int(before, "before", 1)
        kind = query(request, "kind")
    except BadRequest as exc:
        return invalid(exc)
    rows = InboxItem.objects.filter(user=request.user, archived_at__isnull=True)
    if request.GET.get("unread") in ("1", "true"):
        rows = rows.filter(read_at__isnull=True)
    if kind:
        rows = rows.filter(kind=kind[:100])
    if before is not None:
        rows = rows.filter(pk__lt=before)
    page = list(rows.order_by("-pk")[: limit + 1])
    more = len(page) > limit
    page = page[:limit]
    try:
        count, _version = unread.read(request.user.pk)
    except RedisError as exc:
        return unavailable(exc)
    return respond(
        200, {"items": [item.as_json() for item in page], "next": page[-1].pk if more else None, "unread": count}
    )


@require_POST
@csrf_protect
def mark_read(request):
    """POST /api/inbox/read/ {"ids": [..]} or {"up_to": id}: mark those items read, or every unread item up to and
    including ``up_to`` (the newest the page showed: "mark all read" never marks one that arrived since)."""
    return _change(request, "read_at", allow_up_to=True)


@require_POST
@csrf_protect
def archive(request):
    """POST /api/inbox/archive/ {"ids": [..]}: archive those items (they leave the list and the count)."""
    return _change(request, "archived_at", allow_up_to=False)


@require_GET
def open_item(request, item_id):
    """GET /api/inbox/<id>/open/: mark the user's item read and redirect to its own link (404 for an item of someone
    else's, or one without a link). Within the user's rate of changes only: past it, or with Redis unreachable,
    the link still opens and the item stays unread."""
    if not request.user.is_authenticated:
        return unauthorized()
    user_id = request.user.pk
    item = InboxItem.objects.filter(pk=item_id, user_id=user_id).only("url", "read_at").first()
    if item is None or not _own_link(item.url):
        return respond(404, {"error": "not_found", "detail": "no item of yours with a link has this id"})
    if item.read_at is None:
        try:
            if not take_from(keys.inbox_rate(user_id), CHANGE_RATE_PER_S, CHANGE_BURST):
                changed = InboxItem.objects.filter(pk=item.pk, read_at__isnull=True).update(read_at=timezone.now())
                if changed:
                    metrics.count(metrics.INBOX_READS, changed)
                    unread.refresh(user_id)
        except RedisError as exc:
            logger.warning("inbox item %s opened unmarked: Redis is unavailable (%s)", item.pk, type(exc).__name__)
    return HttpResponseRedirect(item.url)


def _own_link(url):
    """An item's stored link as its kind's ``url`` makes it: a path on this site, or an http(s) URL. A path that a
    browser would read as another host ("//host", "/\\host") is never redirected to."""
    if url.startswith(("https://", "http://")):
        return True
    return url.startswith("/") and not url.startswith(("//", "/\\"))


def _change(request, field, allow_up_to):
    if not request.user.is_authenticated:
        return unauthorized()
    user_id = request.user.pk
    try:
        wait = take_from(keys.inbox_rate(user_id), CHANGE_RATE_PER_S, CHANGE_BURST)
    except RedisError as exc:
        return unavailable(exc)
    if wait:
        detail = f"at most {CHANGE_BURST} changes at once, then {CHANGE_RATE_PER_S} a second"
        return respond(429, {"error": "rate_limited", "detail": detail}, {"Retry-After": str(math.ceil(wait))})
    try:
        which = _selection(request, allow_up_to)
    except BadRequest as exc:
        return invalid(exc)
    try:
        changed, count = change(user_id, field, which)
    except RedisError as exc:
        return unavailable(exc)
    return respond(200, {"changed": changed, "unread": count})


def change(user_id, field, which):
    """Set ``field`` ("read_at" or "archived_at") to now on the user's items that ``which`` (a Q) selects, and bring
    the user's unread count in step: (items changed, unread count). The API and the inbox page change items so."""
    # Read: the unread ones (an archived item is out of the count already); archive: the ones not archived yet.
    rows = InboxItem.objects.filter(which, user_id=user_id, read_at__isnull=True, archived_at__isnull=True)
    if field == "archived_at":
        rows = InboxItem.objects.filter(which, user_id=user_id, archived_at__isnull=True)
    read = list(rows.values("pk", "kind", "entity_id", "last_notification")) if field == "read_at" else []
    changed = rows.update(**{field: timezone.now()})
    if field == "read_at" and changed:
        metrics.count(metrics.INBOX_READS, changed)
        activity.write_many(
            {
                "user_id": user_id,
                "outcome": activity_fields.INBOX_READ,
                "kind": item["kind"],
                "entity_id": item["entity_id"],
                "notification_id": item["last_notification"],
                "fold_key": f"inbox:{item['pk']}",
            }
            for item in read
        )
    return changed, unread.refresh(user_id)


def _selection(request, allow_up_to):
    body = read_object(request, BODY_LIMIT)
    fields = {"ids", "up_to"} if allow_up_to else {"ids"}
    if len(body) != 1 or set(body) - fields:
        raise BadRequest("", f"the body must be an object of exactly one of {sorted(fields)}")
    if "up_to" in body:
        return Q(pk__lte=_int(body["up_to"], "up_to", 1))
    ids = body["ids"]
    if not isinstance(ids, list) or not ids or len(ids) > MAX_IDS:
        raise BadRequest("ids", f"must be a list of 1 to {MAX_IDS} item ids")
    return Q(pk__in=[_int(value, f"ids[{index}]", 1) for index, value in enumerate(ids)])


def _int(value, field, minimum, maximum=None):
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise BadRequest(field, f"must be an integer, got {value!r}") from None
    if isinstance(value, bool) or isinstance(value, float) or number < minimum or (maximum and number > maximum):
        upper = f" and <= {maximum}" if maximum else ""
        raise BadRequest(field, f"must be an integer >= {minimum}{upper}, got {value!r}")
    return number
