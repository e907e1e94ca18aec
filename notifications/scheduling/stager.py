"""The stager: puts each class's scheduled sends that come within SLUICE_SCHEDULE["staged_s"] into Redis for the
mover, and after a Redis that lost its data, every pending one again, and the reservations rebuilt.

The database keeps every scheduled send; Redis only the next ``staged_s`` of them (by their due time) and the
reservations. A Redis restarted without its data loses both, and nothing else: the stager finds its marker gone,
rebuilds the class's reservations from the database's reserved rows, and stages everything due within the window
(what came due while Redis was away included: the mover publishes it at once, and a kind's expiry stops what is too
old).
"""

import time
from datetime import UTC, datetime

from django.db.models import Count

from pipeline.admission import schedule as staging
from pipeline.conf import sluice_settings

from .api import RESERVING
from .models import PENDING, PUBLISHING, ScheduledSend

# The window moves in steps of this much: a stager pass finds nothing to do most of the time.
STEP_S = 30
CHUNK = 2000


def stage_window(klass, now=None, step=None):
    """Stage what is due within the window and not staged yet; return how many sends were staged. Works in chunks of
    CHUNK rows, in due order, moving the marker with each, so a ``step`` (pipeline.housekeeping.Step) that runs out of
    budget leaves the rest for the next pass."""
    now = time.time() if now is None else now
    window = sluice_settings().schedule.staged_s
    # The seconds gone by hold nothing any more: their reservations leave Redis, a thousand at a time.
    staging.prune(klass, now - STEP_S)
    until = staging.staged_until(klass)
    horizon = now + window
    if until is not None and horizon - until < STEP_S:
        return 0
    if until is None and klass in RESERVING:
        staging.rebuild(klass, reserved_counts(klass, now))
    rows = ScheduledSend.objects.filter(klass=klass, state__in=(PENDING, PUBLISHING), due_at__lte=_at(horizon))
    if until is not None:
        rows = rows.filter(due_at__gte=_at(until))  # one second's rows may straddle two chunks: staged twice is once
    staged, last = 0, until
    for chunk in _chunks(rows.order_by("due_at", "pk").values_list("pk", "due_at")):
        staging.stage(klass, {pk: due.timestamp() for pk, due in chunk})
        staged += len(chunk)
        last = chunk[-1][1].timestamp()
        if step is not None and step.over() and len(chunk) == CHUNK:
            staging.mark_staged(klass, last)
            step.more = True
            return staged
    staging.mark_staged(klass, horizon)
    return staged


def reserved_counts(klass, now):
    """{second: sends} of ``klass``'s pending reserved sends from now on, counted by the database."""
    found = (
        ScheduledSend.objects.filter(klass=klass, reserved=True, state__in=(PENDING, PUBLISHING), due_at__gte=_at(now))
        .values("due_at")
        .annotate(sends=Count("pk"))
    )
    counts = {}
    for row in found:
        second = int(row["due_at"].timestamp())
        counts[second] = counts.get(second, 0) + row["sends"]
    return counts


def _chunks(rows):
    chunk = []
    for row in rows.iterator(chunk_size=CHUNK):
        chunk.append(row)
        if len(chunk) == CHUNK:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _at(seconds):
    return datetime.fromtimestamp(seconds, UTC)
