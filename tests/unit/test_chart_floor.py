"""The chart's capacity floor window (keda.floorWindow): the exporter averages busy slots over it."""

import helm_python as helm
import pytest

from sluice_tools.autoscale import config

from .test_chart import CASES, FULLNAME, case_values, merged_values, named, render, render_objects


def exporter_args(objects):
    command = named(objects, "Deployment", f"{FULLNAME}-exporter")["spec"]["template"]["spec"]["containers"][0]
    args = command["command"]
    return dict(zip(args[3::2], args[4::2], strict=True))


@pytest.mark.parametrize("case", CASES)
def test_the_exporter_averages_busy_slots_over_the_floor_window(case):
    values = merged_values(case)
    args = exporter_args(render_objects(case_values(case)))
    keda = values["keda"]
    assert float(args["--window"]) == config.parse_duration(keda["latencyWindow"])
    assert float(args["--floor-window"]) == config.parse_duration(keda["floorWindow"])
    assert float(args["--floor-window"]) >= float(args["--window"])


def test_the_simulator_reads_the_floor_window_the_chart_deploys():
    values = merged_values("defaults")
    chart = config.chart_scaling(config.load_values())
    assert chart.floor_window_s == config.parse_duration(values["keda"]["floorWindow"])
    assert chart.floor_window_s > chart.window_s


def test_a_floor_window_shorter_than_the_latency_window_is_refused():
    with pytest.raises(helm.HelmError, match="floorWindow must be at least"):
        render({"keda": {"latencyWindow": "5m", "floorWindow": "2m"}})
    args = exporter_args(render_objects({"keda": {"latencyWindow": "90s", "floorWindow": "1h"}}))
    assert (args["--window"], args["--floor-window"]) == ("90", "3600")


@pytest.mark.parametrize("window", ["15 min", "15", "0.5h", ""])
def test_the_floor_window_must_be_a_duration(window):
    with pytest.raises(helm.HelmError):
        render({"keda": {"floorWindow": window}})
