"""The activity log's two questions, asked of the database: a user's recent steps, and every step of one notification
(with, for a digest, the events it carried, and for a folded event, the digest that carried it)."""

import json
import re
from datetime import timedelta

from django.db.models import Q
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from pipeline import activity_fields as f

from .models import ActivityEntry

#: The most entries one page, command or JSON answer lists.
MAX_LIMIT = 500
# The steps that put an event into a fold key: a digest lists them.
FOLDING = (f.FOLDED, f.COLLAPSED, f.DEFERRED, f.THROTTLED)
# How far back a digest's page looks for the one before it that listed the same keys.
EARLIER_DIGESTS = 50
# How many moves of one scheduled send its page follows back.
MAX_MOVES = 20
_AGO = re.compile(r"^(\d+)([smhd])$")


def parse_since(text):
    """``text`` as a time: an ISO 8601 date or datetime, or an age ("90s", "15m", "12h", "1d"); ValueError naming
    both forms otherwise."""
    found = _AGO.match(text.strip())
    if found:
        amount, unit = int(found[1]), found[2]
        return timezone.now() - timedelta(**{{"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}[unit]: amount})
    parsed = parse_datetime(text) or parse_datetime(f"{text}T00:00:00")
    if parsed is None:
        raise ValueError(f"since must be an ISO 8601 time or an age such as 1d or 12h, got {text!r}")
    return parsed if timezone.is_aware(parsed) else timezone.make_aware(parsed, timezone.get_default_timezone())


def timeline(user_id, kind="", channel="", outcome="", since=None, limit=100, before=None):
    """A user's entries, newest first, narrowed by kind, channel, outcome and time, at most ``limit``
    (MAX_LIMIT); ``before``, an entry's (at, id), pages on: only the entries after it in that order."""
    rows = ActivityEntry.objects.filter(user_id=user_id)
    if before is not None:
        at, pk = before
        rows = rows.filter(Q(at__lt=at) | Q(at=at, pk__lt=pk))
    if kind:
        rows = rows.filter(kind=kind)
    if channel:
        rows = rows.filter(channel=channel)
    if outcome:
        rows = rows.filter(outcome=outcome)
    if since is not None:
        rows = rows.filter(at__gte=since)
    return list(rows.order_by("-at", "-id")[: min(limit, MAX_LIMIT)])


def steps(notification_id):
    """Every entry of ``notification_id`` in order (every channel; for a scheduled send, its earlier versions' too),
    then what ties it to others: (its own entries, the events a digest carried, the digests that carried a folded
    event)."""
    ids, look = [notification_id], notification_id
    # A moved scheduled send's entry names the id its previous version had: follow them back (a bounded chain).
    for _hop in range(MAX_MOVES):
        moved = ActivityEntry.objects.filter(notification_id=look, outcome=f.MOVED).values_list("fold_key", flat=True)
        look = next((previous for previous in moved if previous), None)
        if look is None or look in ids:
            break
        ids.append(look)
    own = list(ActivityEntry.objects.filter(notification_id__in=ids).order_by("at", "id")[:MAX_LIMIT])
    carried, carriers = [], []
    for entry in own:
        if entry.outcome == f.DIGESTED:
            carried += _carried(entry)
        elif entry.outcome in FOLDING and entry.fold_key:
            found = _carrier(entry)
            if found is not None and found not in carriers:
                carriers.append(found)
    return own, carried, carriers


def _members(entry):
    try:
        members = json.loads(entry.fold_key)
    except ValueError:
        return []
    return [m for m in members if isinstance(m, str)] if isinstance(members, list) else []


def _carried(digest):
    """The events a digest entry's fold keys took since the digest before it that listed any of them."""
    members = _members(digest)
    if not members:
        return []
    earlier = ActivityEntry.objects.filter(user_id=digest.user_id, outcome=f.DIGESTED, at__lt=digest.at).order_by("-at")
    after = None
    for row in earlier[:EARLIER_DIGESTS]:
        if set(_members(row)) & set(members):
            after = row.at
            break
    rows = ActivityEntry.objects.filter(
        user_id=digest.user_id, outcome__in=FOLDING, fold_key__in=members, at__lte=digest.at
    )
    if after is not None:
        rows = rows.filter(at__gt=after)
    return list(rows.order_by("at", "id")[:MAX_LIMIT])


def _carrier(event):
    """The first digest entry after a folded event that listed its fold key, or None (not flushed yet)."""
    quoted = json.dumps(event.fold_key, ensure_ascii=False)
    return (
        ActivityEntry.objects.filter(
            user_id=event.user_id, outcome=f.DIGESTED, at__gte=event.at, fold_key__contains=quoted
        )
        .order_by("at", "id")
        .first()
    )
