"""Many days of the simulator (manage.py simulate_autoscale --seeds), its report, and the Monday and incident traces."""

import numpy as np
import pytest
from django.core.management import CommandError, call_command

from sluice_tools.autoscale import seeds_report, traces

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def total(trace):
    return sum(trace.arrivals[k].astype(float) for k in traces.CLASSES)


# Traces


def test_monday_climbs_steeply_to_above_the_ordinary_peak_then_rejoins_the_day():
    monday, day = traces.monday_rate(86400), traces.diurnal_rate(86400)
    hour = 3600
    assert np.array_equal(monday[: 7 * hour], day[: 7 * hour])  # the night is the same
    assert np.array_equal(monday[12 * hour :], day[12 * hour :])  # so is the afternoon
    assert monday[9 * hour] > 1.15 * day.max()  # the surge tops the ordinary peak
    # From the morning trickle to the surge in 90 minutes: far steeper than any climb of the day.
    assert np.diff(monday).max() > 5 * np.diff(day).max()
    trace = traces.monday(seed=4)
    assert (
        total(trace)[8 * hour + 1800 : 9 * hour + 1800].mean()
        > 2 * total(traces.diurnal(seed=4))[8 * hour + 1800 : 9 * hour + 1800].mean()
    )


def test_the_diurnal_incident_is_the_days_traffic_plus_the_incidents_burst():
    for seed in (2, 5):
        day, both = traces.diurnal(seed=seed), traces.diurnal_incident(seed=seed)
        extra = total(both) - total(day)
        burst = np.nonzero(extra)[0]
        assert extra.sum() == 9360
        assert len(burst) == 40
        assert burst[-1] - burst[0] == 39  # one burst of 40 s
        assert 9 * 3600 <= burst[0] <= 17 * 3600
        routine = (both.arrivals["routine"] - day.arrivals["routine"]).sum()
        assert routine == pytest.approx(0.8 * 9360, rel=0.05)
    at = {s: np.nonzero(total(traces.diurnal_incident(seed=s)) - total(traces.diurnal(seed=s)))[0][0] for s in (2, 5)}
    assert at[2] != at[5]  # each seed puts the burst somewhere else in the day


def test_built_in_traces_load_by_name():
    assert set(traces.BUILT_IN) == {"incident", "diurnal", "monday", "diurnal-incident", "top-of-hour"}
    assert traces.load("diurnal-incident", seed=3).name == "diurnal-incident"


# The report


@pytest.mark.parametrize(
    ("text", "seeds"),
    [("1-20", list(range(1, 21))), ("3,1,3", [1, 3]), ("1-3, 7", [1, 2, 3, 7]), ("5", [5])],
)
def test_seed_lists(text, seeds):
    assert seeds_report.parse_seeds(text) == seeds


@pytest.mark.parametrize("text", ["", "a-b", "5-3", "1;2"])
def test_bad_seed_lists(text):
    with pytest.raises(ValueError, match="--seeds"):
        seeds_report.parse_seeds(text)


def summary(spent, flaps, routine_p99):
    return {
        "replica_seconds": spent,
        "flaps": flaps,
        "p99_s": {"critical": 0.0, "routine": routine_p99, "background": 1.0},
    }


def test_the_aggregate_counts_flapping_seeds_and_compares_with_instant_depth():
    per_seed = {
        1: {"windowed_latency": summary(110, 0, 2.0), "instant_depth": summary(100, 3, 30.0)},
        2: {"windowed_latency": summary(150, 2, 4.0), "instant_depth": summary(120, 0, 31.0)},
        3: {"windowed_latency": summary(130, 0, 3.0), "instant_depth": summary(130, 1, 29.0)},
    }
    table = seeds_report.aggregate(per_seed)
    windowed, instant = table["windowed_latency"], table["instant_depth"]
    assert (windowed["seeds_with_flap"], windowed["flaps"], windowed["flapping_seeds"]) == (1, 2, {"2": 2})
    assert (instant["seeds_with_flap"], instant["flaps"]) == (2, 4)
    assert windowed["replica_seconds"] == {"min": 110, "median": 130, "max": 150}
    assert windowed["p99_s"]["routine"] == {"min": 2.0, "median": 3.0, "max": 4.0}
    assert windowed["vs_instant_depth"] == {"min": 1.0, "max": 1.25}
    text = seeds_report.markdown(seeds_report.report("diurnal", per_seed))
    assert "| windowed_latency | 1 of 3 (2: 2) | 2 | 110 / 130 / 150 | 1.000 – 1.250 | 0 s | 2 – 4 s | 1 s |" in text
    assert text.count("\n| ") == 2 + 2 + 3  # two tables: head and a row per policy, a row per seed


@pytest.mark.parametrize("args", [["--seeds", "1-2", "--trace", "no-such.csv"], ["--seeds", "9-1"]])
def test_bad_seed_runs_are_refused(tmp_path, args):
    with pytest.raises(CommandError):
        call_command("simulate_autoscale", *args, "--out", str(tmp_path))
