"""The autoscaling simulator (sluice_tools.autoscale) and its command, manage.py simulate_autoscale."""

import itertools
import json
import math

import numpy as np
import pytest
import yaml
from django.core.management import CommandError, call_command

from sluice_tools.autoscale import config, sim, traces
from sluice_tools.autoscale.hpa import Autoscaler, Policy, Rules, Scaling
from sluice_tools.autoscale.queue import FluidQueue

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def scaling(**overrides):
    base = {
        "target": 30.0,
        "activation": 5.0,
        "min_replicas": 1,
        "max_replicas": 20,
        "up": Rules(0, ()),
        "down": Rules(0, ()),
    }
    return Scaling(**{**base, **overrides})


# The fluid queue


def test_a_backlog_waits_in_order_and_drains_at_the_pool_rate():
    queue = FluidQueue()
    queue.tick(0, 10, 0.0)  # ten arrive, nobody serves
    assert queue.depth == pytest.approx(10)
    assert queue.oldest_age(1.0) == pytest.approx(1.0)
    queue.tick(1, 0, 100.0)  # 100/s drains them in 0.1 s
    assert queue.depth == pytest.approx(0)
    assert queue.oldest_age(2.0) == 0
    # The first arrived at 0 and started at 1; the last arrived at 1 and started at 1.1.
    assert queue.percentile(100) == pytest.approx(1.0, abs=0.15)
    assert queue.percentile(1) == pytest.approx(0.1, abs=0.15)


def test_a_pool_faster_than_arrivals_never_makes_anyone_wait():
    queue = FluidQueue()
    for second in range(60):
        queue.tick(second, 50, 55.0)
    assert queue.served() == pytest.approx(3000)
    assert queue.percentile(99) == 0


def test_an_underpowered_pool_ages_its_oldest_message_by_the_deficit():
    queue = FluidQueue()
    for second in range(100):
        queue.tick(second, 100, 80.0)
    # FIFO with 20% too little capacity: the oldest waiting message ages 0.2 s per second.
    assert queue.oldest_age(100.0) == pytest.approx(20.0, rel=0.05)
    assert queue.depth == pytest.approx(2000, rel=0.01)


def test_the_admission_bound_refuses_what_does_not_fit():
    queue = FluidQueue(capacity=100)
    queue.tick(0, 250, 0.0)
    assert queue.depth == pytest.approx(100)
    assert queue.refused == pytest.approx(150)


# The KEDA/HPA loop


def test_value_metrics_multiply_the_ready_pods():
    hpa = Autoscaler(scaling(), 4)
    assert hpa.sync(15, metric=60.0, ready=4) == 4  # ceil(4 × 60 / 30) = 8
    assert hpa.replicas == 8
    hpa = Autoscaler(scaling(), 4)
    assert hpa.sync(15, metric=60.0, ready=2) == 0  # pods still starting do not count: ceil(2 × 2) = 4


def test_within_tolerance_nothing_moves():
    hpa = Autoscaler(scaling(), 4)
    assert hpa.sync(15, metric=32.9, ready=4) == 0
    assert hpa.sync(30, metric=27.1, ready=4) == 0
    assert hpa.sync(45, metric=33.1, ready=4) == 1  # ceil(4 × 1.103) = 5


def test_average_value_divides_by_the_target_per_pod():
    hpa = Autoscaler(scaling(target=100.0, metric_type="AverageValue"), 2)
    hpa.sync(15, metric=750.0, ready=2)
    assert hpa.replicas == 8


def test_the_capacity_floor_holds_the_pods_the_arriving_work_needs():
    # 16 slots × 0.7 = 11.2 busy slots per pod; latency says nothing (the pool keeps up).
    hpa = Autoscaler(scaling(floor_target=11.2, floor_activation=11.2), 6)
    assert hpa.sync(15, metric=0.0, ready=6, floor_metric=50.0) == -1  # ceil(50 / 11.2) = 5
    assert hpa.replicas == 5
    assert hpa.sync(30, metric=0.0, ready=5, floor_metric=50.0) == 0  # 50 / 56 is within 10%
    assert hpa.sync(45, metric=0.0, ready=5, floor_metric=80.0) == 3  # ceil(80 / 11.2) = 8
    # The HPA takes the larger proposal: a backlog still scales up on latency.
    assert hpa.sync(60, metric=60.0, ready=8, floor_metric=80.0) == 8  # ceil(8 × 60 / 30) = 16
    # Without a floor trigger the busy slots are not read.
    bare = Autoscaler(scaling(), 6)
    bare.sync(15, metric=0.0, ready=6, floor_metric=50.0)
    assert bare.replicas == 1


def test_busy_slots_keep_a_pool_awake_only_above_one_pods_worth():
    hpa = Autoscaler(scaling(min_replicas=0, cooldown_s=300, floor_target=5.6, floor_activation=5.6), 1)
    assert hpa.poll(15, metric=0.0, floor_metric=6.0) == 0
    assert hpa.poll(300, metric=0.0, floor_metric=6.0) == 0  # active: no cooldown to zero
    assert hpa.poll(600, metric=0.0, floor_metric=5.0) == 0  # 300 s since the last active poll: not yet past
    assert hpa.poll(615, metric=0.0, floor_metric=5.0) == -1  # a cooldown without an active trigger


def test_busy_slots_are_arrivals_times_slot_seconds_over_the_window():
    busy = sim.BusySlots(window_s=120, mu=55.0, slots=16)
    for second in range(1, 241):
        value = busy.push(float(second), 110.0, 110.0)
    assert value == pytest.approx(110.0 * 16 / 55.0)  # 32 slots busy: 2 pods' worth at full use
    idle = sim.BusySlots(window_s=120, mu=55.0, slots=16)
    assert idle.push(1.0, 10.0, 0.0) == 0  # nothing sent: the exporter has no send time to measure


def test_scale_down_waits_for_the_stabilization_window_and_respects_policies():
    rules = Rules(300, (Policy("Pods", 1, 60),))
    hpa = Autoscaler(scaling(down=rules), 6)
    assert hpa.sync(15, metric=30.0, ready=6) == 0  # on target: the window now holds a 6
    changes = {t: hpa.sync(t, metric=0.0, ready=hpa.replicas) for t in range(30, 901, 15)}
    assert all(c == 0 for t, c in changes.items() if t < 315)
    downs = [t for t, c in changes.items() if c < 0]
    assert downs[0] == 315
    assert hpa.replicas == 1
    assert all(b - a >= 60 for a, b in itertools.pairwise(downs))
    assert all(c == -1 for c in changes.values() if c)


def test_scale_up_policies_limit_the_step_per_period():
    rules = Rules(0, (Policy("Percent", 100, 120), Policy("Pods", 2, 120)))
    hpa = Autoscaler(scaling(up=rules), 2)
    hpa.sync(15, metric=300.0, ready=2)  # wants 20
    assert hpa.replicas == 4  # at most double in the period
    hpa.sync(30, metric=300.0, ready=4)
    assert hpa.replicas == 4
    hpa.sync(150, metric=300.0, ready=4)
    assert hpa.replicas == 8


def test_keda_wakes_a_pool_from_zero_and_puts_it_back_after_the_cooldown():
    hpa = Autoscaler(scaling(min_replicas=0, cooldown_s=300), 0)
    assert hpa.sync(15, metric=100.0, ready=0) == 0  # the HPA is idle at zero
    assert hpa.poll(15, metric=2.0) == 0  # below activation
    assert hpa.poll(30, metric=6.0) == 1
    assert hpa.poll(330, metric=0.0) == 0  # exactly the cooldown since the last active poll
    assert hpa.poll(345, metric=0.0) == -1
    assert hpa.replicas == 0


def test_flaps_are_reversals_within_five_minutes():
    events = [(0, 1), (100, 1), (200, -1), (1000, 1), (1500, -1), (1600, 1)]
    assert sim.count_flaps(events) == 2  # 100 -> 200 and 1500 -> 1600


# Traces


def test_the_incident_has_its_burst_exactly():
    trace = traces.incident(seed=1)
    burst = sum(int(trace.arrivals[k][300:340].sum()) for k in traces.CLASSES)
    steady = sum(int(trace.arrivals[k][:300].sum()) for k in traces.CLASSES)
    assert 9360 <= burst < 9360 + 150
    assert steady == pytest.approx(90 * 5, rel=0.2)
    routine = int(trace.arrivals["routine"][300:340].sum())
    assert routine == pytest.approx(0.8 * 9360, rel=0.05)


def test_traces_are_deterministic():
    a, b = traces.diurnal(seed=3), traces.diurnal(seed=3)
    assert all(np.array_equal(a.arrivals[k], b.arrivals[k]) for k in traces.CLASSES)
    c = traces.diurnal(seed=4)
    assert not np.array_equal(a.arrivals["routine"], c.arrivals["routine"])


def test_the_diurnal_trace_follows_the_day():
    trace = traces.diurnal(seed=7)
    night = trace.arrivals["routine"][3 * 3600 : 4 * 3600].mean()
    afternoon = trace.arrivals["routine"][14 * 3600 : 15 * 3600].mean()
    assert night < 5 < 150 < afternoon


def test_a_csv_trace(tmp_path):
    path = tmp_path / "spike.csv"
    path.write_text("second,routine,critical\n0,5,1\n3,7,0\n")
    trace = traces.from_csv(path)
    assert trace.seconds == 4
    assert list(trace.arrivals["routine"]) == [5, 0, 0, 7]
    assert list(trace.arrivals["background"]) == [0, 0, 0, 0]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("routine\n5\n", "'second'"),
        ("second,urgent\n0,1\n", "unknown columns"),
        ("second,routine\n0,-1\n", "negative"),
        ("second,routine\n", "no rows"),
    ],
)
def test_bad_csv_traces_are_refused(tmp_path, text, message):
    path = tmp_path / "bad.csv"
    path.write_text(text)
    with pytest.raises(ValueError, match=message):
        traces.from_csv(path)


# Parameters


def test_the_simulator_reads_the_charts_values():
    values = yaml.safe_load(config.CHART_VALUES.read_text())
    chart = config.chart_scaling(config.load_values())
    assert chart.polling_s == values["keda"]["pollingInterval"]
    assert chart.window_s == config.parse_duration(values["keda"]["latencyWindow"])
    for klass in traces.CLASSES:
        auto = values["workers"][klass]["autoscaling"]
        s = chart.classes[klass]
        assert (s.target, s.min_replicas, s.max_replicas) == (
            auto["targetLatencySeconds"],
            auto["minReplicas"],
            auto["maxReplicas"],
        )
        assert s.down.stabilization_s == values["keda"]["behavior"]["scaleDown"]["stabilizationWindowSeconds"]
        assert s.tolerance == values["keda"]["tolerance"]
        slots = values["workers"][klass]["concurrency"]
        assert chart.slots[klass] == slots
        assert s.floor_target == pytest.approx(slots * auto["capacityFloor"]["targetUtilization"])
        assert s.floor_activation == s.floor_target
        assert config.depth_scaling(s, 55.0).floor_target is None  # the baseline has no floor


def test_the_capacity_floor_can_be_switched_off(tmp_path):
    overlay = tmp_path / "nofloor.yaml"
    overlay.write_text("workers:\n  routine:\n    autoscaling:\n      capacityFloor:\n        enabled: false\n")
    chart = config.chart_scaling(config.load_values(config.CHART_VALUES, [overlay]))
    assert chart.classes["routine"].floor_target is None
    assert chart.classes["critical"].floor_target is not None


def test_the_charts_concurrency_is_the_pool_profiles():
    from pipeline.broker.profiles import PROFILES

    chart = config.chart_scaling(config.load_values())
    assert chart.slots == {k: PROFILES[k].concurrency for k in traces.CLASSES}


def test_a_values_overlay_wins(tmp_path):
    overlay = tmp_path / "zero.yaml"
    overlay.write_text(
        "workers:\n  background:\n    autoscaling:\n      minReplicas: 0\n"
        "      behavior:\n        scaleDown:\n          stabilizationWindowSeconds: 60\n"
    )
    chart = config.chart_scaling(config.load_values(config.CHART_VALUES, [overlay]))
    assert chart.classes["background"].min_replicas == 0
    assert chart.classes["background"].down.stabilization_s == 60
    assert chart.classes["background"].down.policies == chart.classes["routine"].down.policies


def test_mu_comes_from_the_profiles_a_capacity_report_or_the_command_line(tmp_path):
    mu = config.settings_mu()
    assert mu["routine"] == pytest.approx(55.0)
    assert mu["critical"] < mu["background"] < mu["routine"]
    report = tmp_path / "capacity.json"
    # manage.py capacity --json: μ per worker slot; a routine pod runs 16 of them.
    report.write_text(
        json.dumps([{"queue": "routine", "mu_per_worker": 4.0}, {"queue": "critical", "mu_per_worker": None}])
    )
    assert config.capacity_mu(report) == {"routine": 64.0}
    report.write_text(json.dumps({"background": {"mu_per_worker": 2.0}}))
    assert config.capacity_mu(report) == {"background": 16.0}
    assert config.capacity_mu(report, slots={"background": 4}) == {"background": 8.0}
    assert config.settings_mu({"critical": 4, "routine": 8, "background": 8})["routine"] == pytest.approx(27.5)
    assert config.parse_mu_overrides(["critical=20"]) == {"critical": 20.0}
    with pytest.raises(ValueError, match="class=value"):
        config.parse_mu_overrides(["urgent=3"])


def test_the_fixed_pool_covers_the_busiest_minute():
    trace = traces.incident()
    chart = config.chart_scaling(config.load_values())
    sizes = sim.fixed_sizes(trace, chart, {"critical": 13.75, "routine": 55.0, "background": 27.5})
    assert sizes["routine"] == math.ceil(trace.peak_rate("routine") / 55.0)


# The command


def run_command(tmp_path, *args):
    summary_path = tmp_path / "summary.json"
    call_command("simulate_autoscale", *args, "--json", str(summary_path), "--out", str(tmp_path))
    return json.loads(summary_path.read_text())


@pytest.mark.parametrize(
    "args",
    [
        ["--trace", "no-such-file.csv"],
        ["--mu", "routine=-1"],
        ["--startup-s", "-5"],
    ],
)
def test_bad_arguments_are_refused(tmp_path, args):
    with pytest.raises(CommandError):
        call_command("simulate_autoscale", *args, "--out", str(tmp_path))


def test_a_minute_long_spike_moves_a_floor_over_a_longer_window_by_little():
    short, long = sim.BusySlots(window_s=120, mu=55.0, slots=16), sim.BusySlots(window_s=900, mu=55.0, slots=16)
    for second in range(1, 1801):
        arrivals = 200.0 if 1740 < second <= 1800 else 100.0  # the last minute doubles
        before = (short.push(float(second), arrivals, arrivals), long.push(float(second), arrivals, arrivals))
    steady = 100.0 * 16 / 55.0
    assert before[0] == pytest.approx(1.5 * steady)  # half the 2-minute window is the spike
    assert before[1] == pytest.approx(steady * 16 / 15)  # a fifteenth of the 15-minute one


def test_with_the_longer_floor_window_a_spike_no_longer_adds_a_pod():
    chart = config.chart_scaling(config.load_values())
    rate = np.full(5400, 150.0)
    rate[3000:3060] *= 2
    arrivals = np.random.default_rng(1).poisson(rate)
    kwargs = {"polling_s": 15, "window_s": 120, "startup_s": 30, "slots": 16}
    runs = {
        floor: sim.run_class(
            arrivals, chart.classes["routine"], 55.0, "windowed_latency", floor_window_s=floor, **kwargs
        )
        for floor in (120, chart.floor_window_s)
    }
    assert [change for t, change in runs[120].events if t > 2900] == [1, -1]  # up for the spike, down later
    assert [change for t, change in runs[chart.floor_window_s].events if t > 2900] == []
    assert runs[chart.floor_window_s].p99_s <= chart.classes["routine"].target
