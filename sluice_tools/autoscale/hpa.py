"""The KEDA + HorizontalPodAutoscaler loop for one pool, following the Kubernetes replica calculator."""

import math
from collections import deque
from dataclasses import dataclass


@dataclass(frozen=True)
class Policy:
    """One HPA scaling policy: at most ``value`` pods or percent per ``period_s``."""

    kind: str  # "Pods" or "Percent"
    value: int
    period_s: int


@dataclass(frozen=True)
class Rules:
    """The HPA behaviour of one direction."""

    stabilization_s: int
    policies: tuple
    select: str = "Max"  # Max, Min or Disabled


@dataclass(frozen=True)
class Scaling:
    """What the ScaledObject of one pool says, plus the metric's target type."""

    target: float
    activation: float
    min_replicas: int
    max_replicas: int
    up: Rules
    down: Rules
    tolerance: float = 0.1
    cooldown_s: int = 300
    metric_type: str = "Value"  # or AverageValue
    # The capacity floor: a second trigger, AverageValue on busy slots. None: no such trigger.
    floor_target: float | None = None  # busy slots per pod (slots per pod × target utilization)
    floor_activation: float | None = None
    # The scheduled trigger: AverageValue on the busy slots ahead (the floor's, plus those the busiest ``span_s`` of
    # the scheduled sends due within ``lookahead_s`` will keep busy). None: no such trigger.
    scheduled_target: float | None = None
    scheduled_activation: float | None = None
    lookahead_s: int = 300
    span_s: int = 1


def _changed_within(events, now, period_s):
    return sum(n for t, n in events if t > now - period_s)


def within_tolerance(ratio, tolerance):
    """Whether a usage ratio is close enough to 1 for the HPA to leave the replicas alone.

    Written as Kubernetes' ``Tolerances.isWithin`` is, ``1 - t <= ratio <= 1 + t``: the same as
    ``|1 - ratio| <= t`` in exact arithmetic, but not in floating point, where 110 / 100 would
    fall just outside a 0.1 tolerance the other way.
    """
    return 1.0 - tolerance <= ratio <= 1.0 + tolerance


def milli(value):
    """A metric or target as KEDA hands it to the HPA: whole milli-units, truncated (``int64(v * 1000)``).

    The HPA then divides one milli-quantity by another, so 33.6 busy slots against 11.2 per pod
    is exactly 3 pods, where float division would give 3.0000000000000004 and ceil would add one.
    """
    return int(value * 1000)


def value_replicas(metric, target, current, ready, tolerance=0.1):
    """An External (or Object) metric with a ``Value`` target: ``ceil(ready pods × metric / target)``.

    The metric is compared with the target as it is, and the ratio multiplies the ready pods, not
    the replicas (``GetExternalMetricReplicas``). Within the tolerance the replicas stay ``current``.
    """
    ratio = milli(metric) / milli(target)
    if current == 0:
        return math.ceil(ratio)
    if within_tolerance(ratio, tolerance):
        return current
    return math.ceil(ratio * ready)


def average_value_replicas(metric, target, current, tolerance=0.1):
    """An External metric with an ``AverageValue`` target: ``ceil(metric / target per pod)``.

    The metric is divided by the current replicas before the comparison, so the tolerance is on
    ``metric / (target × current)``; outside it, the replicas are ``ceil(metric / target)``
    (``GetExternalPerPodMetricReplicas``).
    """
    metric, target = milli(metric), milli(target)
    if within_tolerance(metric / (target * current), tolerance):
        return current
    return math.ceil(metric / target)


def utilization_replicas(usage, requests, target_percent, tolerance=0.1):
    """A Resource metric with a ``Utilization`` target, for ready pods that all report a metric.

    Utilization is the pods' summed usage as a whole percentage of their summed requests
    (truncated, as Kubernetes divides integers), and the ratio to the target multiplies the pods:
    ``ceil(pods × utilization / target)``. Not used by the chart (it scales on latency and busy
    slots), kept so that the three target types are pinned side by side.
    """
    pods = len(usage)
    utilization = int(sum(usage) * 100 // sum(requests))
    ratio = utilization / target_percent
    if within_tolerance(ratio, tolerance):
        return pods
    return math.ceil(ratio * pods)


class Autoscaler:
    """Desired replicas of one pool, from metric samples, as KEDA and the HPA controller compute them.

    ``sync`` is one HPA reconcile (every 15 s by default); ``poll`` is KEDA's activation check
    (every ``pollingInterval``), which alone moves a pool between zero and one replica.
    """

    def __init__(self, scaling, replicas):
        self.s = scaling
        self.replicas = replicas
        self._recommendations = deque()  # (time, unstabilised recommendation)
        self._ups, self._downs = deque(), deque()  # (time, pods added or removed)
        self._last_active = 0.0

    def _proposal(self, metric, ready, floor_metric=None, scheduled_metric=None):
        s = self.s
        if s.metric_type == "Value":
            # Latency does not divide across pods: the HPA multiplies its ratio by the ready pods.
            proposal = value_replicas(metric, s.target, self.replicas, ready, s.tolerance)
        else:
            proposal = average_value_replicas(metric, s.target, self.replicas, s.tolerance)
        # With several metrics the HPA takes the largest proposal, before stabilization.
        for target, value in ((s.floor_target, floor_metric), (s.scheduled_target, scheduled_metric)):
            if target is not None and value is not None:
                proposal = max(proposal, average_value_replicas(value, target, self.replicas, s.tolerance))
        return proposal

    def _stabilise(self, now, desired):
        up_cut, down_cut = now - self.s.up.stabilization_s, now - self.s.down.stabilization_s
        up, down = desired, desired
        while self._recommendations and self._recommendations[0][0] <= min(up_cut, down_cut):
            self._recommendations.popleft()
        for t, rec in self._recommendations:
            if t > up_cut:
                up = min(up, rec)
            if t > down_cut:
                down = max(down, rec)
        self._recommendations.append((now, desired))
        return min(max(self.replicas, up), down)

    def _limit(self, now, rules, sign):
        if rules.select == "Disabled":
            return self.replicas
        proposals = []
        for p in rules.policies:
            start = self.replicas - _changed_within(self._ups, now, p.period_s)
            start += _changed_within(self._downs, now, p.period_s)
            if p.kind == "Pods":
                proposals.append(start + sign * p.value)
            elif sign > 0:
                proposals.append(math.ceil(start * (1 + p.value / 100)))
            else:
                proposals.append(int(start * (1 - p.value / 100)))
        if not proposals:
            return None
        wants_most = (rules.select == "Max") == (sign > 0)
        return max(proposals) if wants_most else min(proposals)

    def _apply(self, now, replicas, by_hpa=True):
        change = replicas - self.replicas
        # The HPA's policies count the HPA's own changes only; KEDA's moves between zero and
        # one are not among its scale events (KEDA writes the scale subresource itself).
        if change > 0 and by_hpa:
            self._ups.append((now, change))
        elif change < 0 and by_hpa:
            self._downs.append((now, -change))
        horizon = now - 1800  # the longest policy period Kubernetes allows
        for events in (self._ups, self._downs):
            while events and events[0][0] < horizon:
                events.popleft()
        self.replicas = replicas
        return change

    def sync(self, now, metric, ready, floor_metric=None, scheduled_metric=None):
        """One HPA reconcile; returns the change in replicas (0 when nothing moved).

        ``floor_metric`` is the capacity floor's busy slots, read when the scaling has a floor trigger;
        ``scheduled_metric`` the busy slots ahead, read when it has a scheduled trigger.
        """
        if self.replicas == 0:
            return 0  # the HPA is idle at zero; KEDA's activation wakes the pool
        # KEDA gives the HPA a minimum of one even when the ScaledObject allows zero.
        floor = max(self.s.min_replicas, 1)
        desired = self._stabilise(now, self._proposal(metric, ready, floor_metric, scheduled_metric))
        if desired > self.replicas:
            limit = self._limit(now, self.s.up, +1)
            if limit is not None:
                desired = min(desired, max(limit, self.replicas))
        elif desired < self.replicas:
            limit = self._limit(now, self.s.down, -1)
            if limit is not None:
                desired = max(desired, min(limit, self.replicas))
        desired = min(max(desired, floor), self.s.max_replicas)
        return self._apply(now, desired)

    def _active(self, metric, floor_metric, scheduled_metric):
        # Activation is "greater than", never "greater than or equal to" (KEDA's scaler IsActive).
        if metric > self.s.activation:
            return True
        s = self.s
        return any(
            target is not None and value is not None and value > (activation or 0.0)
            for target, activation, value in (
                (s.floor_target, s.floor_activation, floor_metric),
                (s.scheduled_target, s.scheduled_activation, scheduled_metric),
            )
        )

    def poll(self, now, metric, floor_metric=None, scheduled_metric=None):
        """KEDA's activation check: wake a pool at zero, or send an idle one back to zero.

        The pool is active when any trigger is above its activation value.
        """
        if self._active(metric, floor_metric, scheduled_metric):
            self._last_active = now
            if self.replicas == 0:
                return self._apply(now, max(self.s.min_replicas, 1), by_hpa=False)
        # KEDA scales to zero once lastActiveTime + cooldownPeriod is before now: strictly after.
        elif self.s.min_replicas == 0 and self.replicas > 0 and now - self._last_active > self.s.cooldown_s:
            return self._apply(now, 0, by_hpa=False)
        return 0
