"""The chart's scheduled trigger (workers.<class>.autoscaling.scheduled): a metrics-api trigger on the exporter's
scheduled load ahead, so a pool grows before a spike of scheduled sends; on for critical, off for the others."""

import math

import helm_python as helm
import pytest

from sluice_tools.autoscale import config

from .test_chart import CASES, CLASSES, FULLNAME, NAMESPACE, case_values, merged_values, named, render, render_objects


def scheduled_triggers(objects, klass):
    triggers = named(objects, "ScaledObject", f"{FULLNAME}-worker-{klass}")["spec"]["triggers"]
    return [t for t in triggers if t["name"] == "scheduled"]


def scaler_url(klass):
    return f"http://{FULLNAME}-exporter.{NAMESPACE}.svc.cluster.local:9808/scaler/{klass}"


@pytest.mark.parametrize("case", [c for c in CASES if c != "keda-disabled-values.yaml"])
def test_a_pool_has_the_scheduled_trigger_exactly_when_it_is_switched_on(case):
    values = merged_values(case)
    objects = render_objects(case_values(case))
    for klass in CLASSES:
        pool = values["workers"][klass]
        auto = pool["autoscaling"]
        found = scheduled_triggers(objects, klass)
        if not auto["scheduled"]["enabled"]:
            assert found == [], klass
            continue
        (trigger,) = found
        # The exporter's JSON even when the other triggers ask Prometheus: a per-second peak is no series.
        assert (trigger["type"], trigger["metricType"]) == ("metrics-api", "AverageValue")
        within = config.parse_duration(auto["scheduled"]["lookAhead"])
        span = max(1, math.ceil(auto["targetLatencySeconds"]))
        meta = trigger["metadata"]
        assert meta["url"] == f"{scaler_url(klass)}?within={within}&span={span}"
        assert meta["format"] == "json"
        assert meta["valueLocation"] == "busy_slots_ahead"  # the floor is on in every case
        per_pod = pool["concurrency"] * auto["scheduled"]["targetUtilization"]
        assert float(meta["targetValue"]) == pytest.approx(per_pod)
        assert float(meta["activationTargetValue"]) == pytest.approx(per_pod)


def test_on_for_critical_only_by_default():
    objects = render_objects()
    (critical,) = scheduled_triggers(objects, "critical")
    assert critical["metadata"]["url"] == f"{scaler_url('critical')}?within=300&span=1"
    assert scheduled_triggers(objects, "routine") == []
    assert scheduled_triggers(objects, "background") == []


def test_switched_on_for_routine_and_off_for_critical():
    objects = render_objects(
        {
            "workers": {
                "critical": {"autoscaling": {"scheduled": {"enabled": False}}},
                "routine": {"autoscaling": {"scheduled": {"enabled": True, "lookAhead": "10m"}}},
            }
        }
    )
    assert scheduled_triggers(objects, "critical") == []
    (routine,) = scheduled_triggers(objects, "routine")
    assert routine["metadata"]["url"] == f"{scaler_url('routine')}?within=600&span=30"
    assert float(routine["metadata"]["targetValue"]) == pytest.approx(16 * 0.9)


def test_without_the_floor_the_trigger_reads_the_scheduled_slots_alone():
    # Else switching the floor off would leave one in place: busy_slots_ahead includes the floor's busy slots.
    objects = render_objects({"workers": {"critical": {"autoscaling": {"capacityFloor": {"enabled": False}}}}})
    (critical,) = scheduled_triggers(objects, "critical")
    assert critical["metadata"]["valueLocation"] == "scheduled_busy_slots"
    triggers = named(objects, "ScaledObject", f"{FULLNAME}-worker-critical")["spec"]["triggers"]
    assert [t["name"] for t in triggers] == ["latency", "scheduled"]


def test_with_prometheus_the_scheduled_trigger_still_reads_the_exporter():
    objects = render_objects(case_values("prometheus-values.yaml"))
    triggers = named(objects, "ScaledObject", f"{FULLNAME}-worker-critical")["spec"]["triggers"]
    assert [(t["name"], t["type"]) for t in triggers] == [
        ("latency", "prometheus"),
        ("busy-slots", "prometheus"),
        ("scheduled", "metrics-api"),
    ]


def test_by_default_it_is_no_tighter_than_the_floor():
    """With nothing scheduled busy_slots_ahead is busy_slots: at a utilization no lower than the floor's, its
    proposal is never above the floor's, so switching it on changes nothing until sends are scheduled."""
    for klass in CLASSES:
        auto = merged_values("defaults")["workers"][klass]["autoscaling"]
        assert auto["scheduled"]["targetUtilization"] >= auto["capacityFloor"]["targetUtilization"], klass


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"exporter": {"enabled": False}, "keda": {"trigger": "prometheus"}}, "enable exporter, or set"),
        ({"workers": {"critical": {"autoscaling": {"scheduled": {"lookAhead": "2h"}}}}}, "at most 1h"),
        (
            {"workers": {"background": {"autoscaling": {"scheduled": {"enabled": True, "lookAhead": "1m"}}}}},
            "at least targetLatencySeconds",
        ),
    ],
)
def test_values_it_cannot_work_with_are_refused(values, message):
    with pytest.raises(helm.HelmError, match=message):
        render(values)


@pytest.mark.parametrize(
    "scheduled",
    [
        {"lookAhead": "5 min"},
        {"lookAhead": 300},
        {"targetUtilization": 0},
        {"targetUtilization": 1.5},
        {"within": "5m"},
        {"enabled": "yes"},
    ],
)
def test_the_schema_checks_the_switch(scheduled):
    with pytest.raises(helm.HelmError):
        render({"workers": {"critical": {"autoscaling": {"scheduled": scheduled}}}})


def test_without_keda_the_exporter_may_be_off():
    objects = render_objects({"keda": {"enabled": False}, "exporter": {"enabled": False}})
    assert [o for o in objects if o["kind"] == "ScaledObject"] == []
