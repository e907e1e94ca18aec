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


def _changed_within(events, now, period_s):
    return sum(n for t, n in events if t > now - period_s)


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

    def _average_value(self, metric, target):
        # An external AverageValue metric: the ratio is to the target times the current replicas.
        ratio = metric / (target * self.replicas)
        if abs(1.0 - ratio) <= self.s.tolerance:
            return self.replicas
        return math.ceil(metric / target)

    def _proposal(self, metric, ready, floor_metric=None):
        s = self.s
        if s.metric_type == "Value":
            ratio = metric / s.target
            if abs(1.0 - ratio) <= s.tolerance:
                proposal = self.replicas
            else:
                # Latency does not divide across pods: the HPA multiplies by the ready pods.
                proposal = math.ceil(ratio * ready)
        else:
            proposal = self._average_value(metric, s.target)
        if s.floor_target is not None and floor_metric is not None:
            # With several metrics the HPA takes the largest proposal, before stabilization.
            proposal = max(proposal, self._average_value(floor_metric, s.floor_target))
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

    def _apply(self, now, replicas):
        change = replicas - self.replicas
        if change > 0:
            self._ups.append((now, change))
        elif change < 0:
            self._downs.append((now, -change))
        horizon = now - 1800  # the longest policy period Kubernetes allows
        for events in (self._ups, self._downs):
            while events and events[0][0] < horizon:
                events.popleft()
        self.replicas = replicas
        return change

    def sync(self, now, metric, ready, floor_metric=None):
        """One HPA reconcile; returns the change in replicas (0 when nothing moved).

        ``floor_metric`` is the capacity floor's busy slots, read when the scaling has a floor trigger.
        """
        if self.replicas == 0:
            return 0  # the HPA is idle at zero; KEDA's activation wakes the pool
        # KEDA gives the HPA a minimum of one even when the ScaledObject allows zero.
        floor = max(self.s.min_replicas, 1)
        desired = self._stabilise(now, self._proposal(metric, ready, floor_metric))
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

    def _active(self, metric, floor_metric):
        if metric > self.s.activation:
            return True
        s = self.s
        return s.floor_target is not None and floor_metric is not None and floor_metric > (s.floor_activation or 0.0)

    def poll(self, now, metric, floor_metric=None):
        """KEDA's activation check: wake a pool at zero, or send an idle one back to zero.

        The pool is active when any trigger is above its activation value.
        """
        if self._active(metric, floor_metric):
            self._last_active = now
            if self.replicas == 0:
                return self._apply(now, max(self.s.min_replicas, 1))
        elif self.s.min_replicas == 0 and self.replicas > 0 and now - self._last_active >= self.s.cooldown_s:
            return self._apply(now, 0)
        return 0
