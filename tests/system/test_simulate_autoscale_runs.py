"""Whole simulated days and incidents through manage.py simulate_autoscale (long simulations: the system tier)."""

import yaml

from sluice_tools.autoscale import config, traces
from tests.unit.test_simulate_autoscale import (
    PNG_MAGIC,
    run_command,
)


def test_the_incident_summary_and_plot(tmp_path, capsys):
    summary = run_command(tmp_path, "--trace", "incident")
    assert set(summary) == {"windowed_latency", "instant_depth", "fixed_peak"}
    for row in summary.values():
        assert set(row["p99_s"]) == set(traces.CLASSES)
        assert row["replica_seconds"] > 0
        assert row["flaps"] >= 0
    assert (tmp_path / "autoscale-incident.png").read_bytes().startswith(PNG_MAGIC)
    assert "windowed_latency" in capsys.readouterr().out
    # The same seed gives the same numbers.
    assert run_command(tmp_path, "--trace", "incident") == summary


def test_on_the_diurnal_trace_windowed_latency_never_flaps_and_holds_routine_within_target_for_less(tmp_path):
    # Issue 7's Must-show. The capacity floor keeps the pods the arriving work needs, so a
    # scale-down stops there instead of probing one pod too far and coming straight back.
    # Issue 19's: within 10% of instant depth's replica-seconds, critical never waiting at p99.
    summary = run_command(tmp_path, "--trace", "diurnal")
    windowed, fixed = summary["windowed_latency"], summary["fixed_peak"]
    target = yaml.safe_load(config.CHART_VALUES.read_text())["workers"]["routine"]["autoscaling"]
    assert windowed["flaps"] == 0
    assert windowed["p99_s"]["routine"] <= target["targetLatencySeconds"]
    assert windowed["p99_s"]["critical"] == 0
    assert windowed["replica_seconds"] < fixed["replica_seconds"]
    assert windowed["replica_seconds"] <= 1.1 * summary["instant_depth"]["replica_seconds"]
    assert fixed["flaps"] == 0


def test_a_slower_pool_waits_longer(tmp_path):
    fast = run_command(tmp_path, "--trace", "incident")
    slow = run_command(tmp_path, "--trace", "incident", "--mu", "routine=30")
    assert slow["fixed_peak"]["p99_s"]["routine"] > fast["fixed_peak"]["p99_s"]["routine"]


def test_the_admission_bound_is_reported(tmp_path):
    summary = run_command(tmp_path, "--trace", "incident", "--admission")
    assert summary["windowed_latency"]["refused"]["routine"] > 0


def test_the_top_of_hour_trace_runs_the_pools_with_and_without_the_scheduled_trigger_side_by_side(tmp_path, capsys):
    summary = run_command(tmp_path, "--trace", "top-of-hour")
    assert list(summary) == ["windowed_latency", "windowed_scheduled", "instant_depth", "fixed_peak"]
    ahead, behind = summary["windowed_scheduled"], summary["windowed_latency"]
    minimum = yaml.safe_load(config.CHART_VALUES.read_text())["workers"]["critical"]["autoscaling"]["minReplicas"]
    # Every :50 spike finds the pool grown with the trigger, and at its minimum without it (the :59 spike finds it
    # still up from the :50 one's scale-up on latency).
    assert min(ahead["scheduled"]["critical"]["ready_at_first_due"]) > minimum
    assert behind["scheduled"]["critical"]["ready_at_first_due"][::2] == [minimum] * 3
    assert ahead["scheduled"]["critical"]["late"] == 0 < behind["scheduled"]["critical"]["late"]
    assert ahead["flaps"] == 0
    assert ahead["p99_s"]["critical"] < behind["p99_s"]["critical"]
    out = capsys.readouterr().out
    assert "windowed_scheduled" in out
    assert "scheduled critical:" in out
    assert (tmp_path / "autoscale-top-of-hour.png").read_bytes().startswith(PNG_MAGIC)
