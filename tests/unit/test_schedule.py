"""Quiet hours and cadence ticks in UTC instants, exact across midnight and both daylight-saving changes."""

import itertools
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from notifications.preferences.schedule import daily_ticks, hourly_ticks, quiet_intervals

ZONES = ["America/New_York", "Europe/Berlin"]
# The four changes of 2026 in the two zones, and the week around each.
CHANGES = [
    datetime(2026, 3, 8, 7, tzinfo=UTC),  # New York springs forward at 02:00 local
    datetime(2026, 11, 1, 6, tzinfo=UTC),  # New York falls back at 02:00 local
    datetime(2026, 3, 29, 1, tzinfo=UTC),  # Berlin springs forward at 02:00 local
    datetime(2026, 10, 25, 1, tzinfo=UTC),  # Berlin falls back at 03:00 local
]
MINUTE = 60


def wall_seconds(zone, instant):
    """Seconds after local midnight that the wall clock in ``zone`` shows at ``instant``."""
    local = datetime.fromtimestamp(instant, ZoneInfo(zone))
    return local.hour * 3600 + local.minute * 60 + local.second


def inside(start, end, seconds):
    return start <= seconds < end if start < end else seconds >= start or seconds < end


@settings(max_examples=300, deadline=None)
@given(
    zone=st.sampled_from(ZONES),
    change=st.sampled_from(CHANGES),
    start=st.integers(0, 24 * 60 - 1),
    end=st.integers(0, 24 * 60 - 1),
    offset=st.integers(-3 * 86400, 3 * 86400),
)
def test_an_event_is_held_exactly_when_the_wall_clock_is_inside_the_window(zone, change, start, end, offset):
    if start == end:
        return
    start_s, end_s = start * MINUTE, end * MINUTE
    since = change.timestamp() - 4 * 86400
    intervals = quiet_intervals(zone, start_s, end_s, since, since + 8 * 86400)
    instant = int(change.timestamp()) + offset
    held = any(low <= instant < high for low, high in intervals)
    assert held == inside(start_s, end_s, wall_seconds(zone, instant))


@pytest.mark.parametrize("zone", ZONES)
def test_a_window_across_midnight_and_the_night_the_clocks_go_back(zone):
    fall_back = CHANGES[1] if zone == "America/New_York" else CHANGES[3]
    since = fall_back.timestamp() - 86400
    intervals = quiet_intervals(zone, 22 * 3600, 7 * 3600, since, since + 2 * 86400)
    # The night of the change is one hour longer, and all of it is quiet: 10 hours of real time, not 9.
    longest = max(high - low for low, high in intervals)
    assert longest == 10 * 3600


@settings(max_examples=100, deadline=None)
@given(zone=st.sampled_from(ZONES), change=st.sampled_from(CHANGES), at=st.integers(0, 24 * 60 - 1))
def test_a_daily_digest_comes_once_a_local_day_at_its_time_or_at_the_jump_past_it(zone, change, at):
    at_s = at * MINUTE
    since = change.timestamp() - 3 * 86400
    ticks = daily_ticks(zone, at_s, since, since + 6 * 86400)
    tz = ZoneInfo(zone)
    days = [datetime.fromtimestamp(t, tz).date() for t in ticks]
    assert len(days) == len(set(days)), "two digests on one local day"
    assert all((b - a) == timedelta(days=1) for a, b in itertools.pairwise(days)), "a day without one"
    for tick in ticks:
        shown = wall_seconds(zone, tick)
        if shown != at_s:
            # Only when the clocks skipped the time: then the digest comes at the instant they jumped past it.
            before = wall_seconds(zone, tick - 1)
            assert before < at_s < shown or (before > shown and at_s < shown)
            assert datetime.fromtimestamp(tick - 1, tz).utcoffset() != datetime.fromtimestamp(tick, tz).utcoffset()


@pytest.mark.parametrize("change", CHANGES)
def test_hourly_ticks_come_every_real_hour_across_a_change(change):
    zone = "America/New_York" if change.month in (3, 11) and change.day in (8, 1) else "Europe/Berlin"
    ticks = hourly_ticks(zone, change.timestamp() - 5 * 3600, change.timestamp() + 5 * 3600)
    assert all(b - a == 3600 for a, b in itertools.pairwise(ticks))
    assert all(wall_seconds(zone, t) % 3600 == 0 for t in ticks)
    assert len(ticks) == 10
