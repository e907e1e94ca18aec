"""Many simulated days of autoscaling: the report and the burst days (long simulations: the system tier)."""

import json

from django.core.management import call_command

from sluice_tools.autoscale import config, traces
from tests.unit.test_autoscale_seeds import (
    PNG_MAGIC,
)


def test_the_seeds_command_reports_each_policy_and_plots_one_day(tmp_path):
    doc_path, md_path = tmp_path / "seeds.json", tmp_path / "seeds.md"
    # The incident trace is half an hour: two seeds keep this test short.
    args = ["--trace", "incident", "--seeds", "1-2", "--out", str(tmp_path)]
    call_command("simulate_autoscale", *args, "--json", str(doc_path), "--markdown", str(md_path))
    doc = json.loads(doc_path.read_text())
    assert doc["seeds"] == [1, 2]
    assert set(doc["policies"]) == {"windowed_latency", "instant_depth", "fixed_peak"}
    for policy, row in doc["policies"].items():
        spent = [doc["per_seed"][s][policy]["replica_seconds"] for s in ("1", "2")]
        assert row["replica_seconds"]["min"] == min(spent)
        assert row["replica_seconds"]["max"] == max(spent)
        assert set(row["p99_s"]) == set(traces.CLASSES)
    assert md_path.read_text().startswith("## incident: seeds 1–2")
    png = tmp_path / f"autoscale-incident-seed{doc['plot_seed']}.png"
    assert png.read_bytes().startswith(PNG_MAGIC)
    # One seed alone gives that seed's numbers: the days do not leak into each other.
    call_command(
        "simulate_autoscale", "--trace", "incident", "--seeds", "2", "--json", str(doc_path), "--out", str(tmp_path)
    )
    assert json.loads(doc_path.read_text())["per_seed"]["2"] == doc["per_seed"]["2"]


def test_on_the_days_with_a_burst_the_chart_stays_calm_lean_and_fast(tmp_path):
    # Seeds 18 and 20 carry two spikes on top of each other (four times the rate for half a
    # minute): the costliest days of the 20 for windowed latency, and the slowest for routine.
    doc_path = tmp_path / "seeds.json"
    call_command(
        "simulate_autoscale", "--trace", "diurnal", "--seeds", "18,20", "--plot-seed", "18",
        "--json", str(doc_path), "--out", str(tmp_path),
    )  # fmt: skip
    doc = json.loads(doc_path.read_text())
    windowed = doc["policies"]["windowed_latency"]
    assert windowed["seeds_with_flap"] == 0
    assert windowed["vs_instant_depth"]["max"] <= 1.1
    assert windowed["p99_s"]["critical"]["max"] == 0
    chart = config.chart_scaling(config.load_values())
    assert windowed["p99_s"]["routine"]["max"] <= chart.classes["routine"].target
