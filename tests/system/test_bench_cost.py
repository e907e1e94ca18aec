"""bench cost, small: its report has the figures the docs quote, and they are measured (not zero)."""

import io

import pytest
from django.test import override_settings

from sluice_tools.bench import cost, cost_report, hotpath, memory


@pytest.mark.django_db
@pytest.mark.timeout(90)
def test_cost_of_critical_accepted_is_measured_on_both_sides(redis_client, redis_server):
    with override_settings(SLUICE_KINDS=cost.KINDS, SLUICE_CHANNELS=cost.CHANNELS):
        part = cost.Run(redis_server.url, 30, 1, io.StringIO()).accepted("critical")
        profile = hotpath.run("cost.routine", calls=20)
    assert part["producer"]["commands_per_event"] > 0
    assert part["producer"]["commands_by_name_per_event"]["evalsha"] >= 1  # admission is one script
    worker = part["worker"]
    assert worker["commands_per_event"] > part["producer"]["commands_per_event"]
    assert worker["per_s"] > 0
    assert "worker" in worker["cpu_us_per_event"]
    row = cost_report.end_to_end(part)
    assert set(row) == {
        "commands_per_event",
        "redis_cpu_us_per_event",
        "producer_cpu_us_per_event",
        "worker_cpu_us_per_event",
    }
    assert profile["us_per_task"] > 0
    assert profile["own_time_top"]


@pytest.mark.timeout(60)
def test_marks_take_less_memory_than_a_key_each(redis_client):
    report = memory.run(redis_client, rate=200, sample=2000)
    assert report["sent_mark_after"]["bytes_per_mark"] < report["sent_mark_before"]["bytes_per_mark"]
    assert report["marks_held_at_rate_mib_after"] < report["marks_held_at_rate_mib_before"]
    assert report["send_claim"]["bytes_per_claim"] > 0
