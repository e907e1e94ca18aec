"""A user's time in UTC instants: quiet hours as intervals, digest cadence as ticks, exact across DST changes.

Admission decides in Redis, where there are no time zones: the mirror (notifications.preferences) hands it
these instants, computed here with zoneinfo for the days ahead. An event is held exactly when the user's
wall clock reads a time inside the quiet window (a wall-clock time that happens twice on the night the
clocks go back is quiet both times); a daily digest comes once per local day at its time (at the end of
the gap when the clocks skip that time); an hourly one at every local hour that exists.
"""

import math
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

DAY = 86400
HOUR = 3600
PROBE_S = 1800  # no time zone changes its offset twice within half an hour


def _offset(zone, instant):
    return int(datetime.fromtimestamp(instant, UTC).astimezone(zone).utcoffset().total_seconds())


def segments(zone, since, until):
    """[(start, end, offset)]: UTC instants (seconds) cut where the zone's UTC offset changes."""
    zone = ZoneInfo(zone) if isinstance(zone, str) else zone
    until = math.ceil(until)
    start, offset, out = int(since), _offset(zone, since), []
    probe = start
    while probe < until:
        following = min(probe + PROBE_S, until)
        after = _offset(zone, following)
        if after != offset:
            low, high = probe, following  # the offset is `offset` at low, `after` at high
            while high - low > 1:
                middle = (low + high) // 2
                low, high = (middle, high) if _offset(zone, middle) == offset else (low, middle)
            out.append((start, high, offset))
            start, offset = high, after
        probe = following
    out.append((start, until, offset))
    return out


def quiet_intervals(zone, start_s, end_s, since, until):
    """UTC [start, end) intervals in which the wall clock of ``zone`` reads a time in the daily window from
    ``start_s`` to ``end_s`` (seconds after local midnight; end before start crosses midnight)."""
    if start_s == end_s:
        return []
    length = (end_s - start_s) % DAY
    found = []
    for seg_start, seg_end, offset in segments(zone, since, until):
        first_day = (seg_start + offset) // DAY - 1
        last_day = (seg_end + offset) // DAY + 1
        for day in range(first_day, last_day + 1):
            low = day * DAY + start_s - offset
            high = low + length
            low, high = max(low, seg_start), min(high, seg_end)
            if low < high:
                found.append([low, high])
    found.sort()
    merged = []
    for low, high in found:
        if merged and low <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], high)
        else:
            merged.append([low, high])
    return [tuple(interval) for interval in merged]


def hourly_ticks(zone, since, until):
    """The UTC instants in [since, until) at which the wall clock of ``zone`` shows a new hour (hh:00:00)."""
    ticks = []
    for seg_start, seg_end, offset in segments(zone, since, until):
        local = -(-(seg_start + offset) // HOUR) * HOUR  # the first local hour at or after the segment's start
        while local - offset < seg_end:
            ticks.append(local - offset)
            local += HOUR
    return sorted(set(ticks))


def daily_ticks(zone, at_s, since, until):
    """One UTC instant per local day in [since, until): when the wall clock of ``zone`` reaches ``at_s``
    seconds after midnight (the first time, on the night it happens twice); on the day the clocks skip that
    time, the instant they jump past it."""
    zone = ZoneInfo(zone) if isinstance(zone, str) else zone
    ticks = []
    day = datetime.fromtimestamp(since, UTC).astimezone(zone).date() - timedelta(days=1)
    last = datetime.fromtimestamp(until, UTC).astimezone(zone).date()
    while day <= last:
        wall = datetime(day.year, day.month, day.day) + timedelta(seconds=at_s)
        found = [
            instant
            for fold in (0, 1)
            if datetime.fromtimestamp(instant := wall.replace(tzinfo=zone, fold=fold).timestamp(), zone).replace(
                tzinfo=None
            )
            == wall
        ]
        if found:
            ticks.append(int(min(found)))
        else:
            # A gap: read with the offset after the jump, the wall time falls before it; with the one before, after
            # it. The jump itself lies between the two.
            before = int(wall.replace(tzinfo=zone, fold=1).timestamp())
            after = int(wall.replace(tzinfo=zone, fold=0).timestamp())
            ticks.append(next(start for start, _end, _off in segments(zone, before, after + 1) if start > before))
        day += timedelta(days=1)
    return sorted(t for t in set(ticks) if since <= t < until)
