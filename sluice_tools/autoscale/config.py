"""Simulator parameters: the chart's values.yaml for KEDA and the HPA, settings or measurements for μ."""

import json
import math
import re
from dataclasses import dataclass, replace
from pathlib import Path

import yaml

from .hpa import Policy, Rules, Scaling
from .traces import CLASSES

CHART_VALUES = Path(__file__).resolve().parents[2] / "helm" / "sluice" / "values.yaml"
# The kube-controller-manager defaults: the HPA reconciles every 15 s with a 10% tolerance.
HPA_SYNC_S = 15
HPA_TOLERANCE = 0.1
# One worker slot (process or thread) sends 55/16 msg/s: the incident's 55 msg/s per 16-thread routine pod.
SLOT_RATE = 55.0 / 16.0


@dataclass(frozen=True)
class ChartScaling:
    """The autoscaling half of the chart's values, per class."""

    polling_s: int
    window_s: int
    classes: dict  # class -> hpa.Scaling
    slots: dict  # class -> worker slots per pod (workers.<class>.concurrency)
    floor_window_s: int | None = None  # the busy-slots window (keda.floorWindow); None: the latency window


def parse_duration(text):
    """A Prometheus duration such as ``2m`` or ``90s`` in seconds."""
    match = re.fullmatch(r"(\d+)(s|m|h)", str(text).strip())
    if not match:
        raise ValueError(f"not a duration like 90s, 2m or 1h: {text!r}")
    return int(match[1]) * {"s": 1, "m": 60, "h": 3600}[match[2]]


def _merge(base, extra):
    merged = dict(base)
    for key, value in extra.items():
        merged[key] = (
            _merge(merged[key], value) if isinstance(value, dict) and isinstance(merged.get(key), dict) else value
        )
    return merged


def load_values(path=CHART_VALUES, overlays=()):
    """The chart's values.yaml with each overlay file merged on top, as ``helm -f`` would."""
    values = yaml.safe_load(Path(path).read_text())
    for overlay in overlays:
        values = _merge(values, yaml.safe_load(Path(overlay).read_text()) or {})
    return values


def _rules(raw):
    policies = tuple(Policy(p["type"], int(p["value"]), int(p["periodSeconds"])) for p in raw.get("policies", ()))
    return Rules(int(raw.get("stabilizationWindowSeconds", 0)), policies, raw.get("selectPolicy", "Max"))


def chart_scaling(values):
    """Per-class ``Scaling`` from the chart's values: latency targets in seconds, the capacity floor in busy slots."""
    keda = values["keda"]
    classes, slots = {}, {}
    for klass in CLASSES:
        pool = values["workers"][klass]
        auto = pool["autoscaling"]
        behavior = _merge(keda["behavior"], auto.get("behavior") or {})
        tolerance = float(keda.get("tolerance", HPA_TOLERANCE))
        slots[klass] = int(pool["concurrency"])
        floor = auto.get("capacityFloor") or {}
        # The chart's busy-slots trigger: target and activation are one pod's slots × the utilization.
        per_pod = slots[klass] * float(floor["targetUtilization"]) if floor.get("enabled") else None
        # The scheduled trigger's, from its own utilization. Read whether or not it is switched on: on a trace with
        # scheduled sends the simulator runs the pools with it and without it side by side (sim.policies_for).
        ahead = auto.get("scheduled") or {}
        ahead_per_pod = slots[klass] * float(ahead["targetUtilization"]) if ahead else None
        classes[klass] = Scaling(
            target=float(auto["targetLatencySeconds"]),
            activation=float(auto["activationLatencySeconds"]),
            min_replicas=int(auto["minReplicas"]),
            max_replicas=int(auto["maxReplicas"]),
            up=_rules(behavior["scaleUp"]),
            down=_rules(behavior["scaleDown"]),
            tolerance=tolerance,
            cooldown_s=int(keda["cooldownPeriod"]),
            floor_target=per_pod,
            floor_activation=per_pod,
            scheduled_target=ahead_per_pod,
            scheduled_activation=ahead_per_pod,
            lookahead_s=parse_duration(ahead["lookAhead"]) if ahead else 300,
            # The chart's span: the pool's latency target, whole seconds, at least one.
            span_s=max(1, math.ceil(float(auto["targetLatencySeconds"]))),
        )
    window_s = parse_duration(keda["latencyWindow"])
    floor_window_s = parse_duration(keda["floorWindow"]) if keda.get("floorWindow") else window_s
    return ChartScaling(int(keda["pollingInterval"]), window_s, classes, slots, floor_window_s)


def depth_scaling(scaling, mu):
    """The instant-depth twin of a pool's scaling: same behaviour, AverageValue on depth.

    The depth target per pod is what one pod drains within the class's latency target (μ × T),
    so both policies aim at the same latency and differ only in the signal. It is the baseline,
    so it gets no capacity floor and no scheduled trigger.
    """
    per_pod = mu * scaling.target
    return replace(
        scaling,
        target=per_pod,
        activation=mu * scaling.activation,
        metric_type="AverageValue",
        floor_target=None,
        floor_activation=None,
        scheduled_target=None,
        scheduled_activation=None,
    )


def _slots(slots):
    if slots is not None:
        return slots
    from pipeline.broker.profiles import PROFILES

    return {k: PROFILES[k].concurrency for k in CLASSES}


def settings_mu(slots=None):
    """μ per pod of each class: slots per pod × SLOT_RATE (slots: the chart's concurrency, or the profiles')."""
    slots = _slots(slots)
    return {k: slots[k] * SLOT_RATE for k in CLASSES}


def capacity_mu(path, queue_names=None, slots=None):
    """μ per pod from ``manage.py capacity --json``: measured ``mu_per_worker`` × the pool's concurrency.

    The report's μ is per worker slot (process or thread) and a pod runs one worker with its
    slots (``slots``, the chart's concurrency; the profiles' by default). It is a list of
    ``{"queue": name, "mu_per_worker": x}``; a map of queue name to such entries is read as well.
    ``queue_names`` maps class to queue name (default: the same).
    """
    slots = _slots(slots)
    report = json.loads(Path(path).read_text())
    if isinstance(report, dict):
        report = [{"queue": name, **entry} for name, entry in report.items() if isinstance(entry, dict)]
    by_queue = {e.get("queue"): e for e in report if isinstance(e, dict)}
    found = {}
    for klass in CLASSES:
        entry = by_queue.get((queue_names or {}).get(klass, klass))
        if entry and entry.get("mu_per_worker"):
            found[klass] = float(entry["mu_per_worker"]) * slots[klass]
    if not found:
        raise ValueError(f"{path}: no queue of {list(CLASSES)} has a measured mu_per_worker")
    return found


def parse_mu_overrides(items):
    """``["routine=55", ...]`` as ``{"routine": 55.0}``."""
    found = {}
    for item in items:
        klass, _, value = item.partition("=")
        if klass not in CLASSES or not value:
            raise ValueError(f"--mu takes class=value with a class in {list(CLASSES)}: {item!r}")
        rate = float(value)
        if rate <= 0:
            raise ValueError(f"--mu {item!r}: μ must be positive")
        found[klass] = rate
    return found
