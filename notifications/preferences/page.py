"""The preference page: every kind a user may change, by category, each of its channels instant, digest or off, and
their quiet hours, time zone and cadence; a plain form with CSRF, saved through the same checks as PUT
/api/preferences/ (notifications.preferences.replace), and shown in the user's language and zone.

The page decides each kind on each of its channels. Saving keeps the user's choices for a category or for every
kind, and writes a row for a kind and channel only where what the page asks differs from what those give; a row of
the user's own that the page shows unchanged stays, so a choice of "instant" made elsewhere stays the user's own.
"""

from zoneinfo import available_timezones

from django.contrib.auth.views import redirect_to_login
from django.http import HttpResponseNotAllowed, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.utils.translation import gettext_lazy as _
from django.views.decorators.csrf import csrf_protect

from notifications import preferences
from notifications.reader import for_request, reading
from pipeline.conf import sluice_settings
from pipeline.conf.mail import mail_settings

from .models import CADENCES, NotificationSettings, Preference
from .replace import Refused, save

TEMPLATE = "sluice/pages/preferences.html"
MODE_LABELS = {"instant": _("Instant"), "digest": _("Digest"), "off": _("Off")}


@csrf_protect
def preferences_page(request):
    """GET: the form with the user's preferences as they stand; POST: save it (303 back to the page, "saved")."""
    if not request.user.is_authenticated:
        return redirect_to_login(request.get_full_path())
    if request.method not in ("GET", "HEAD", "POST"):
        return HttpResponseNotAllowed(["GET", "POST"])
    reader = for_request(request)
    with reading(reader):
        if request.method == "POST":
            user_id = request.user.pk
            try:
                save(user_id, lambda: body_of(user_id, request.POST))
            except Refused as exc:
                return render(request, TEMPLATE, context_of(request, exc, request.POST), status=exc.status)
            return HttpResponseRedirect(reverse("sluice:preferences_page") + "?saved=1", status=303)
        return render(request, TEMPLATE, context_of(request, None, None))


def field_name(kind, channel):
    """The form field of ``kind`` on ``channel``."""
    return f"mode:{kind.name}:{channel}"


def _modes(rows, kind):
    """{channel: mode} that ``rows`` give ``kind``."""
    instant, digest, _strict = preferences.resolve(kind, rows)
    return {c: "instant" if c in instant else "digest" if c in digest else "off" for c in kind.channels}


def body_of(user_id, form):
    """PUT /api/preferences/'s body for what the page's ``form`` asks (see the module's docstring)."""
    conf = sluice_settings()
    kinds = [kind for kind in conf.kinds.values() if not kind.mandatory]
    categories = {kind.category for kind in conf.kinds.values()}
    rows = {(r.kind, r.category, r.channel): r.mode for r in Preference.objects.filter(user_id=user_id)}
    # The choices for a category or every kind stay (those the settings still know); a kind's rows are the page's.
    kept = {
        scope: mode
        for scope, mode in rows.items()
        if not scope[0] and scope[1] in categories | {""} and scope[2] in {*conf.channels, ""}
    }
    chosen = dict(kept)
    for kind in kinds:
        given, now = _modes(kept, kind), _modes(rows, kind)
        for channel in kind.channels:
            asked = form.get(field_name(kind, channel)) or now[channel]
            own = rows.get((kind.name, "", channel), rows.get((kind.name, "", "")))
            if asked == own and asked == now[channel]:
                chosen[(kind.name, "", channel)] = asked  # the user's own row, shown unchanged: it stays theirs
            elif asked != given[channel]:
                chosen[(kind.name, "", channel)] = asked
    start, end = (form.get("quiet_start") or "").strip(), (form.get("quiet_end") or "").strip()
    return {
        "preferences": [
            {"kind": kind, "category": category, "channel": channel, "mode": mode}
            for (kind, category, channel), mode in sorted(chosen.items())
        ],
        "timezone": form.get("timezone") or "UTC",
        "quiet_hours": {"start": start or None, "end": end or None} if start or end else None,
        "cadence": form.get("cadence") or "immediate",
        "digest_at": (form.get("digest_at") or "").strip() or None,
    }


def context_of(request, refused, form):
    """The template's context: the kinds by category with each channel's mode and choices, the settings, whether
    it was just saved, and what was refused (with the form as it was sent)."""
    user_id = request.user.pk
    rows = {(r.kind, r.category, r.channel): r.mode for r in Preference.objects.filter(user_id=user_id)}
    row = NotificationSettings.objects.filter(user_id=user_id).first()
    groups = {}
    for kind in sluice_settings().kinds.values():
        modes = _modes(rows, kind)
        cells = []
        for channel in kind.channels:
            name = field_name(kind, channel)
            allowed = ("instant", "off") if kind.klass == "critical" else ("instant", "digest", "off")
            mode = form.get(name, modes[channel]) if form is not None else modes[channel]
            choices = [(value, MODE_LABELS[value]) for value in allowed]
            cells.append({"channel": channel, "name": name, "mode": mode, "choices": choices})
        entry = {"name": kind.name, "title": str(kind.title), "mandatory": kind.mandatory, "cells": cells}
        entry["critical"] = kind.klass == "critical"
        groups.setdefault(kind.category, []).append(entry)
    values = _settings_values(row) if form is None else {name: form.get(name, "") for name in SETTINGS_FIELDS}
    conf = mail_settings()
    return {
        "groups": [{"category": name, "kinds": kinds} for name, kinds in sorted(groups.items(), key=_named_last)],
        "settings": values,
        "timezones": sorted(available_timezones()),
        "cadences": CADENCES,
        "saved": form is None and request.GET.get("saved") == "1",
        "refused": refused,
        "site_name": conf.site_name,
        "site_url": conf.site_url,
        "request": request,
    }


SETTINGS_FIELDS = ("timezone", "quiet_start", "quiet_end", "cadence", "digest_at")


def _named_last(group):
    # Kinds without a category come first, under no heading; then the categories by name.
    return (group[0] != "", group[0])


def _settings_values(row):
    if row is None:
        return {"timezone": "UTC", "quiet_start": "", "quiet_end": "", "cadence": "immediate", "digest_at": ""}
    hhmm = lambda value: value.strftime("%H:%M") if value else ""  # noqa: E731
    return {
        "timezone": row.timezone,
        "quiet_start": hhmm(row.quiet_start),
        "quiet_end": hhmm(row.quiet_end),
        "cadence": row.cadence,
        "digest_at": hhmm(row.digest_at),
    }
