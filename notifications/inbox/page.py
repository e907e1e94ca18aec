"""The inbox page: the signed-in user's whole inbox, newest first, a page at a time, with an unread filter, and
forms to mark an item read, archive it, or mark all read; shown in the user's language and zone.

Plain forms with CSRF, no script. A POST changes the items as the API does (views.change), within the same rate of
changes per user, and answers 303 back to the page it came from, rebuilt from the filter and page number alone (never
a URL the request names).
"""

import math
from urllib.parse import urlencode

from django.contrib.auth.views import redirect_to_login
from django.core.paginator import Paginator
from django.db.models import Max, Q
from django.http import HttpResponseNotAllowed, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.csrf import csrf_protect
from redis.exceptions import RedisError

from notifications.inbox.models import InboxItem
from notifications.reader import for_request, reading
from pipeline.conf.mail import mail_settings
from pipeline.gates.token_bucket import take_from
from pipeline.redis import keys

from . import unread
from .views import CHANGE_BURST, CHANGE_RATE_PER_S, change

TEMPLATE = "sluice/pages/inbox.html"
PER_PAGE = 20
ACTIONS = {"read": "read_at", "archive": "archived_at", "read_all": "read_at"}


@csrf_protect
def inbox_page(request):
    """GET ?unread=1&page=<n>: a page of the user's items; POST action=read|archive (id) or read_all (up_to)."""
    if not request.user.is_authenticated:
        return redirect_to_login(request.get_full_path())
    if request.method not in ("GET", "HEAD", "POST"):
        return HttpResponseNotAllowed(["GET", "POST"])
    only_unread = (request.POST if request.method == "POST" else request.GET).get("unread") == "1"
    with reading(for_request(request)):
        if request.method == "POST":
            return _post(request, only_unread)
        return render(request, TEMPLATE, _context(request, only_unread, request.GET.get("page")))


def _post(request, only_unread):
    user_id = request.user.pk
    action = request.POST.get("action")
    which = _which(action, request.POST)
    if which is None:
        problem = "choose an item to mark read or archive"
        return render(request, TEMPLATE, _context(request, only_unread, request.POST.get("page"), problem), status=400)
    try:
        wait = take_from(keys.inbox_rate(user_id), CHANGE_RATE_PER_S, CHANGE_BURST)
        if wait:
            context = _context(request, only_unread, request.POST.get("page"), "busy")
            response = render(request, TEMPLATE, context, status=429)
            response["Retry-After"] = str(math.ceil(wait))
            return response
        change(user_id, ACTIONS[action], which)
    except RedisError:
        context = _context(request, only_unread, request.POST.get("page"), "unavailable")
        return render(request, TEMPLATE, context, status=503)
    return HttpResponseRedirect(page_url(only_unread, request.POST.get("page")), status=303)


def _which(action, form):
    """The items a POST names (a Q), or None for a form that names none."""
    if action not in ACTIONS:
        return None
    field = "up_to" if action == "read_all" else "id"
    try:
        value = int(form.get(field, ""))
    except ValueError:
        return None
    if value < 1:
        return None
    return Q(pk__lte=value) if action == "read_all" else Q(pk=value)


def page_url(only_unread, number):
    """The page's own URL for the filter and a page number (kept only when it is a number)."""
    query = {}
    if only_unread:
        query["unread"] = "1"
    if str(number or "").isdigit() and int(number) > 1:
        query["page"] = int(number)
    return reverse("sluice:inbox_page") + (f"?{urlencode(query)}" if query else "")


def _context(request, only_unread, number, problem=""):
    user_id = request.user.pk
    rows = InboxItem.objects.filter(user_id=user_id, archived_at__isnull=True)
    newest = rows.aggregate(newest=Max("pk"))["newest"]
    if only_unread:
        rows = rows.filter(read_at__isnull=True)
    page = Paginator(rows.order_by("-pk"), PER_PAGE).get_page(number)
    try:
        count = unread.read(user_id)[0]
    except RedisError:
        count = None
    conf = mail_settings()
    return {
        "page": page,
        "items": [_shown(item) for item in page.object_list],
        "only_unread": only_unread,
        "unread": count,
        "newest": newest,
        "problem": problem,
        "all_url": page_url(False, None),
        "unread_url": page_url(True, None),
        "previous_url": page_url(only_unread, page.previous_page_number()) if page.has_previous() else "",
        "next_url": page_url(only_unread, page.next_page_number()) if page.has_next() else "",
        "site_name": conf.site_name,
        "site_url": conf.site_url,
        "request": request,
    }


def _shown(item):
    open_url = reverse("sluice:inbox_open", args=[item.pk]) if item.url else ""
    return {"item": item, "open_url": open_url, "when": item.happened_at or item.updated_at}
