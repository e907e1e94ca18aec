"""bench schedule at a tiny scale: it runs, and its invariants hold (its times are the bench's figures, not checked)."""

import pytest

from sluice_tools.bench import schedule_move, schedule_spike
from sluice_tools.bench.schedule_common import bench_users

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(60)]


def test_the_move_sends_nothing_at_the_old_times_and_each_reminder_once_at_its_new_one(redis_client):
    report = schedule_move.run(scale=0.02)
    assert (report["attendees"], report["occurrences"]) == (4, 2)
    for method in schedule_move.METHODS:
        part = report[method]
        assert part["staged_before_the_move"] == 4  # the first occurrence is soon: staged, then moved away
        assert part["published_at_old_times"] == 0
        assert part["reminders_sent_exactly_once"] == part["published_at_new_times"] == 8
        assert (part["reminders_missing"], part["reminders_doubled"], part["rows_left"]) == (0, 0, 0)
        assert part["redis_commands"] > 0
        assert part["db_queries"] > 0
    assert report["notify"]["calls"] == 8
    assert report["notify_many"]["calls"] == 2
    assert report["holds"]


def test_the_spike_schedules_window_times_rate_and_refuses_the_rest_with_a_time_that_has_room(redis_client):
    users = bench_users("bench-spike", 100)
    part = schedule_spike.refused_part(redis_client, users, 2)
    assert (part["scheduled"], part["refused"], part["refusals_naming_a_time"]) == (88, 12, 12)
    assert part["most_in_one_second"] == 44
    assert part["refusal_time_has_room"]
    assert part["refused_then_scheduled_at_that_time"] == "scheduled"
    assert part["reserved_after_cancel"] == 0
    assert part["holds"]
