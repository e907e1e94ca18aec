"""The simulator's scheduled sends: the top-of-hour trace, the scheduled trigger (busy slots ahead), and what a pool
does with it and without it when reminders come due at :50 and :59."""

import numpy as np
import pytest

from sluice_tools.autoscale import config, seeds_report, sim, traces
from sluice_tools.autoscale.hpa import Autoscaler, Rules, Scaling


def scaling(**overrides):
    base = {
        "target": 1.0,
        "activation": 0.5,
        "min_replicas": 2,
        "max_replicas": 10,
        "up": Rules(0, ()),
        "down": Rules(0, ()),
    }
    return Scaling(**{**base, **overrides})


# The trace


def test_reminders_are_reserved_latest_first_within_their_window():
    # docs/scheduling.md's example: 10,000 due at one second from a pool that reserves 44 a second.
    counts, send_at = np.zeros(2000, dtype=np.int64), np.full(2000, np.nan)
    assert traces.reserve(counts, send_at, 1000, 10_000, 240, 44) == 0
    busy = np.flatnonzero(counts)
    assert (busy[0], busy[-1]) == (1000 - 227, 1000)  # 09:46:13 to 09:50:00
    assert counts.max() == 44
    assert counts.sum() == 10_000
    assert set(send_at[busy]) == {1000}
    counts, send_at = np.zeros(2000, dtype=np.int64), np.full(2000, np.nan)
    assert traces.reserve(counts, send_at, 1000, 10_000, 100, 44) == 5_600  # refused at scheduling
    assert counts.sum() == 4_400
    # A second that holds sends due at another time is passed over: 44 at 1001, and no room for 6 at 1000 or 999.
    assert traces.reserve(counts, send_at, 1001, 50, 3, 44) == 6
    assert (counts[1001], send_at[1001], counts[1000], send_at[1000]) == (44, 1001, 44, 1000)


def test_the_top_of_hour_trace_spikes_at_50_and_59_on_an_ordinary_load():
    trace = traces.top_of_hour(seed=3, hours=2)
    due = trace.scheduled["critical"]
    assert trace.seconds == 7200
    assert due.refused == 0
    assert due.counts.max() <= traces.RESERVED_PER_S
    # Each spike ends at its send_at: :50:00 and :59:00 of each hour.
    ends = sorted({int(s) for s in due.send_at[due.counts > 0]})
    assert ends == [50 * 60, 59 * 60, 3600 + 50 * 60, 3600 + 59 * 60]
    assert len(due.spikes()) == 4
    assert all(s < end for s, end in zip(due.spikes(), ends, strict=True))
    ordinary = trace.arrivals["critical"] - due.counts
    assert ordinary.mean() == pytest.approx(100 * traces.MIX["critical"], rel=0.05)
    assert trace.arrivals["routine"].mean() == pytest.approx(100 * traces.MIX["routine"], rel=0.05)
    assert traces.load("top-of-hour", seed=3).name == "top-of-hour"


# The trigger


def test_the_scheduled_trigger_proposes_the_pods_the_load_ahead_needs():
    hpa = Autoscaler(scaling(floor_target=1.68, floor_activation=1.68, scheduled_target=3.2), 2)
    assert hpa.sync(15, metric=0.0, ready=2, floor_metric=2.0) == 0  # nothing ahead: the floor's 2 pods
    assert hpa.sync(30, metric=0.0, ready=2, floor_metric=2.0, scheduled_metric=14.8) == 3  # ceil(14.8 / 3.2)
    assert hpa.replicas == 5
    woken = Autoscaler(scaling(min_replicas=0, scheduled_target=3.2, scheduled_activation=3.2), 0)
    assert woken.poll(15, metric=0.0, scheduled_metric=3.0) == 0
    assert woken.poll(30, metric=0.0, scheduled_metric=4.0) == 1  # more than a pod's worth due: wake up


def test_busy_slots_ahead_are_the_busiest_span_of_the_look_ahead():
    counts = np.zeros(1000)
    counts[500:510] = 44
    ahead = sim.BusySlotsAhead(counts, 300, 1, mu=13.75, slots=4, with_floor=True, floor_window_s=900)
    assert ahead.peak(100.0) == 0  # seconds 100 to 400: before the spike
    assert ahead.peak(250.0) == 44
    assert ahead.peak(510.0) == 0  # gone by
    assert ahead.read(250.0, busy_slots=2.0) == 2.0  # no send time measured yet: only the floor's
    ahead.push(1.0, 5.0)
    assert ahead.read(250.0, busy_slots=2.0) == pytest.approx(2.0 + 44 * 4 / 13.75)
    wide = sim.BusySlotsAhead(counts, 300, 20, mu=13.75, slots=4, with_floor=False, floor_window_s=900)
    assert wide.peak(250.0) == pytest.approx(440 / 20)
    wide.push(1.0, 5.0)
    assert wide.read(250.0, busy_slots=2.0) == pytest.approx(22 * 4 / 13.75)  # no floor: the scheduled slots alone


def test_the_simulator_reads_the_scheduled_trigger_from_the_chart():
    values = config.load_values()
    chart = config.chart_scaling(values)
    for klass in traces.CLASSES:
        auto = values["workers"][klass]["autoscaling"]
        s = chart.classes[klass]
        assert s.scheduled_target == pytest.approx(chart.slots[klass] * auto["scheduled"]["targetUtilization"])
        assert s.lookahead_s == config.parse_duration(auto["scheduled"]["lookAhead"])
    assert (chart.classes["critical"].span_s, chart.classes["routine"].span_s) == (1, 30)
    assert config.depth_scaling(chart.classes["critical"], 13.75).scheduled_target is None


# The pool, with and without it


def first_scale_up(run):
    return next(t for t, change in run.events if change > 0)


def test_with_the_trigger_the_pool_grows_before_the_reminders_and_without_it_after():
    trace = traces.top_of_hour(seed=5, hours=1)
    chart = config.chart_scaling(config.load_values())
    mu = config.settings_mu(chart.slots)
    runs = sim.simulate(trace, chart, mu, policies=("windowed_latency", sim.SCHEDULED_POLICY))
    first_due = trace.scheduled["critical"].spikes()[0]
    smallest = chart.classes["critical"].min_replicas
    ahead, behind = runs[sim.SCHEDULED_POLICY]["critical"], runs["windowed_latency"]["critical"]

    assert first_scale_up(ahead) < first_due
    assert ahead.ready[first_due] > smallest
    assert ahead.scheduled["late"] == 0
    assert ahead.flaps == 0

    assert first_scale_up(behind) > first_due
    assert behind.ready[first_due] == smallest
    assert behind.scheduled["late"] > 0
    assert behind.scheduled["max_s"] > chart.classes["critical"].target
    summary = sim.summarise(runs)
    assert summary[sim.SCHEDULED_POLICY]["scheduled"]["critical"]["ready_at_first_due"][0] > smallest


def test_without_scheduled_sends_the_trigger_changes_nothing():
    trace = traces.incident(seed=2)
    chart = config.chart_scaling(config.load_values())
    mu = config.settings_mu(chart.slots)
    assert sim.policies_for(trace) == sim.POLICIES
    runs = sim.simulate(trace, chart, mu, policies=("windowed_latency", sim.SCHEDULED_POLICY))
    for klass in traces.CLASSES:
        assert np.array_equal(runs["windowed_latency"][klass].replicas, runs[sim.SCHEDULED_POLICY][klass].replicas)


def test_the_seeds_report_adds_the_scheduled_sends():
    def day(late, ready):
        return {
            "p99_s": dict.fromkeys(traces.CLASSES, 0.0),
            "replica_seconds": 100,
            "flaps": 0,
            "scheduled": {
                "critical": {
                    "sends": 10,
                    "p50_s": 0.0,
                    "p99_s": late,
                    "max_s": late,
                    "late": int(late > 1),
                    "ready_at_first_due": ready,
                }
            },
        }

    doc = seeds_report.report("top-of-hour", {1: {"p": day(0.0, [5, 5])}, 2: {"p": day(3.0, [2, 4])}})
    assert doc["policies"]["p"]["scheduled"]["critical"] == {
        "sends": 20,
        "late": 1,
        "p99_s": 3.0,
        "max_s": 3.0,
        "ready_at_first_due": {"min": 2, "max": 5},
    }
    assert "| p | critical | 20 | 1 | 3 s | 3 s | 2 – 5 |" in seeds_report.markdown(doc)
