"""/u/<token>/: the one-click unsubscribe link of every email of a kind that is not mandatory (RFC 8058, RFC 2369).

The token authenticates (notifications.unsubscribe_links): no session, no CSRF token (the view is csrf_exempt; a
forged request could only turn off what the token already names). A POST whose body is ``List-Unsubscribe=One-Click``
turns each scope the token names off on its channel, at once, through the preference API (so the Redis mirror
admission reads follows), and answers 200 with no redirect. A GET only shows what the link would turn off, with a
button that POSTs the same body, and a link to the preference page: mail scanners follow links, and a GET never
changes anything. A token that was changed, is too old, names a user who is gone or a mandatory kind is a 4xx that
changes nothing.
"""

import logging
import math

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db import transaction
from django.http import HttpResponseNotAllowed
from django.shortcuts import render
from django.utils import translation
from django.views.decorators.csrf import csrf_exempt
from redis.exceptions import RedisError

from notifications import preferences
from notifications.reader import Reader, reading
from notifications.unsubscribe_links import BadLink, path_of, read
from pipeline.conf import sluice_settings
from pipeline.conf.mail import mail_settings
from pipeline.gates.token_bucket import take_from
from pipeline.redis import keys

from .models import validate_choice
from .replace import PUT_BURST, PUT_RATE_PER_S

logger = logging.getLogger("sluice.preferences")

TEMPLATE = "sluice/pages/unsubscribe.html"
ONE_CLICK = "One-Click"


@csrf_exempt
def unsubscribe(request, token):
    """GET: what the link turns off, and a button; POST List-Unsubscribe=One-Click: turn it off (200)."""
    if request.method not in ("GET", "HEAD", "POST"):
        return HttpResponseNotAllowed(["GET", "POST"])
    try:
        found = read(token)
        user = _user(found.user_id)
        labels = _checked(found)
    except BadLink as exc:
        page = {"state": exc.reason, "detail": str(exc)}
        return _page(request, None, page, status=410 if exc.reason == "expired" else 400)
    # The token's user, in the language SLUICE_USER_LANGUAGE gives them, else the request's.
    reader = Reader(user.pk, user=user, default_language=translation.get_language())
    shown = {"labels": labels, "token": token, "channel": found.channel}
    if request.method != "POST":
        return _page(request, reader, {**shown, "state": "confirm"})
    if request.POST.get("List-Unsubscribe") != ONE_CLICK:
        detail = "send List-Unsubscribe=One-Click as the form's body (RFC 8058)"
        return _page(request, reader, {**shown, "state": "confirm", "detail": detail}, 400)
    try:
        wait = take_from(keys.preferences_rate(user.pk), PUT_RATE_PER_S, PUT_BURST)
        if wait:
            return _page(request, reader, {**shown, "state": "busy"}, 429, {"Retry-After": str(math.ceil(wait))})
        with transaction.atomic(), preferences.replacing(user.pk):
            for kind, category in found.scopes:
                preferences.set(user, mode="off", kind=kind, category=category, channel=found.channel)
    except RedisError as exc:
        logger.warning("an unsubscribe link was not applied: Redis is unavailable (%s)", type(exc).__name__)
        return _page(request, reader, {**shown, "state": "unavailable"}, 503)
    return _page(request, reader, {**shown, "state": "done"})


def _user(user_id):
    model = get_user_model()
    try:
        pk = model._meta.pk.to_python(user_id)
    except ValidationError:
        raise BadLink("invalid", "this is not an unsubscribe link of ours") from None
    user = model._default_manager.filter(pk=pk).first()
    if user is None:
        raise BadLink("invalid", "this link's account is gone")
    return user


def _checked(found):
    """What each scope turns off, in words; BadLink when one may not be turned off (a mandatory kind, a kind or
    channel the settings no longer know): nothing is changed then."""
    conf = sluice_settings()
    labels = []
    for kind, category in found.scopes:
        try:
            validate_choice(kind, category, found.channel, "off")
        except ValidationError:
            raise BadLink("invalid", "this link names something that cannot be turned off") from None
        labels.append({"kind": str(conf.kinds[kind].title) if kind else "", "category": category})
    return labels


def _page(request, reader, page, status=200, headers=None):
    conf = mail_settings()
    context = {
        "channel": "",
        **page,
        "site_name": conf.site_name,
        "site_url": conf.site_url,
        "preferences_url": path_of("sluice:preferences_page"),
        "request": request,
    }
    if reader is None:
        response = render(request, TEMPLATE, context, status=status)
    else:
        with reading(reader):
            response = render(request, TEMPLATE, context, status=status)
    for name, value in (headers or {}).items():
        response[name] = value
    return response
