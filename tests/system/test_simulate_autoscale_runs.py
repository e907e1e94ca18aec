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
