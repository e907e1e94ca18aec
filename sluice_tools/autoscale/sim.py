"""The simulation: each class's queue and pool, one second at a time, under one scaling policy."""

import itertools
import math
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from .config import HPA_SYNC_S, depth_scaling
from .hpa import Autoscaler
from .queue import FluidQueue
from .traces import CLASSES

POLICIES = ("windowed_latency", "instant_depth", "fixed_peak")
# A scale in one direction undone by one in the other within this long is a flap.
FLAP_WINDOW_S = 300


@dataclass
class ClassRun:
    """What one pool did over the trace, second by second."""

    replicas: np.ndarray
    ready: np.ndarray
    latency: np.ndarray
    depth: np.ndarray
    p99_s: float = 0.0
    refused: float = 0.0
    events: list = field(default_factory=list)  # (second, change in replicas)

    @property
    def replica_seconds(self):
        return float(self.replicas.sum())

    @property
    def flaps(self):
        return count_flaps(self.events)


def count_flaps(events, window_s=FLAP_WINDOW_S):
    """Scale-direction reversals: a change whose sign differs from the previous one's, within ``window_s``."""
    flaps = 0
    for (t0, c0), (t1, c1) in itertools.pairwise(events):
        if (c0 > 0) != (c1 > 0) and t1 - t0 < window_s:
            flaps += 1
    return flaps


class SlidingMax:
    """The maximum of the samples of the last ``window_s`` seconds (monotonic deque, O(1) amortised)."""

    def __init__(self, window_s):
        self.window_s = window_s
        self._items = deque()

    def push(self, now, value):
        while self._items and self._items[-1][1] <= value:
            self._items.pop()
        self._items.append((now, value))
        while self._items[0][0] <= now - self.window_s:
            self._items.popleft()
        return self._items[0][1]


class SlidingSum:
    """The sum of the samples of the last ``window_s`` seconds."""

    def __init__(self, window_s):
        self.window_s = window_s
        self._items = deque()
        self.total = 0.0

    def push(self, now, value):
        self._items.append((now, value))
        self.total += value
        while self._items[0][0] <= now - self.window_s:
            self.total -= self._items.popleft()[1]
        return self.total


class BusySlots:
    """The exporter's ``busy_slots`` (Little's law): arrivals per second over the window × slot-seconds per message.

    A slot sends 1/μ_slot seconds per message, with μ_slot = μ per pod ÷ slots per pod. Like the
    exporter, it reads zero when nothing was sent during the window (no send time to measure).
    """

    def __init__(self, window_s, mu, slots):
        self.window_s = window_s
        self.seconds_per_message = slots / mu if mu > 0 else 0.0
        self._arrived, self._served = SlidingSum(window_s), SlidingSum(window_s)

    def push(self, now, arrived, served):
        arrivals = self._arrived.push(now, arrived)
        if self._served.push(now, served) <= 1e-9:
            return 0.0
        return arrivals / min(now, self.window_s) * self.seconds_per_message


class Pods:
    """A Deployment's pods: each serves once its start-up delay has passed."""

    def __init__(self, replicas):
        self.ready_at = [0.0] * replicas

    def resize(self, now, replicas, startup_s):
        while len(self.ready_at) < replicas:
            self.ready_at.append(now + startup_s)
        # The ReplicaSet removes pods that are not ready yet first; the newest are those.
        del self.ready_at[replicas:]

    def ready(self, now):
        return sum(1 for t in self.ready_at if t <= now)


def fixed_sizes(trace, scaling, mu):
    """A fixed pool sized for the peak: enough pods for the busiest minute, within the chart's bounds."""
    sizes = {}
    for klass in CLASSES:
        s = scaling.classes[klass]
        need = math.ceil(trace.peak_rate(klass, 60) / mu[klass])
        sizes[klass] = min(max(need, s.min_replicas, 1), s.max_replicas)
    return sizes


def run_class(
    arrivals,
    scaling,
    mu,
    policy,
    *,
    polling_s,
    window_s,
    startup_s,
    fixed=None,
    capacity=None,
    slots=1,
    floor_window_s=None,
):
    """Simulate one pool under ``policy``: ``scaling`` is its chart ``hpa.Scaling``, ``slots`` its concurrency.

    Latency is read over ``window_s``; busy slots over ``floor_window_s`` (the exporter's
    ``--floor-window``), the latency window when None.
    """
    seconds = len(arrivals)
    out = ClassRun(*(np.zeros(seconds) for _ in range(4)))
    queue = FluidQueue(capacity)
    if policy == "fixed_peak":
        controller, start = None, fixed
    else:
        if policy == "instant_depth":
            scaling = depth_scaling(scaling, mu)
        controller = Autoscaler(scaling, scaling.min_replicas)
        start = scaling.min_replicas
    pods = Pods(start)
    window = SlidingMax(window_s)
    busy = BusySlots(floor_window_s or window_s, mu, slots)
    for second in range(seconds):
        now = second + 1.0
        ready = pods.ready(second)
        depth, refused = queue.depth, queue.refused
        queue.tick(second, float(arrivals[second]), ready * mu)
        admitted = float(arrivals[second]) - (queue.refused - refused)
        latency = queue.oldest_age(now)
        windowed = window.push(now, latency)
        busy_slots = busy.push(now, admitted, depth + admitted - queue.depth)
        if controller is not None:
            metric = windowed if policy == "windowed_latency" else queue.depth
            change = 0
            # The capacity floor is read only where the scaling has that trigger (not instant depth).
            if second % polling_s == polling_s - 1:
                change = controller.poll(now, metric, busy_slots)
            if second % HPA_SYNC_S == HPA_SYNC_S - 1:
                change += controller.sync(now, metric, pods.ready(now), busy_slots)
            if change:
                pods.resize(now, controller.replicas, startup_s)
                out.events.append((now, change))
        out.replicas[second] = len(pods.ready_at)
        out.ready[second] = ready
        out.latency[second] = latency
        out.depth[second] = queue.depth
    out.p99_s = queue.percentile(99)
    out.refused = queue.refused
    return out


def simulate(trace, scaling, mu, *, startup_s=30, capacity=None, policies=POLICIES):
    """Every policy over ``trace``: ``{policy: {class: ClassRun}}``."""
    sizes = fixed_sizes(trace, scaling, mu)
    runs = {}
    for policy in policies:
        runs[policy] = {
            klass: run_class(
                trace.arrivals[klass],
                scaling.classes[klass],
                mu[klass],
                policy,
                polling_s=scaling.polling_s,
                window_s=scaling.window_s,
                floor_window_s=scaling.floor_window_s,
                startup_s=startup_s,
                fixed=sizes[klass],
                capacity=capacity,
                slots=scaling.slots[klass],
            )
            for klass in CLASSES
        }
    return runs


def summarise(runs):
    """The JSON summary: per policy, p99 wait per class, replica-seconds and flaps (with per-class detail)."""
    summary = {}
    for policy, by_class in runs.items():
        summary[policy] = {
            "p99_s": {k: round(r.p99_s, 3) for k, r in by_class.items()},
            "replica_seconds": round(sum(r.replica_seconds for r in by_class.values())),
            "flaps": sum(r.flaps for r in by_class.values()),
            "replica_seconds_by_class": {k: round(r.replica_seconds) for k, r in by_class.items()},
            "flaps_by_class": {k: r.flaps for k, r in by_class.items()},
            "max_replicas": {k: int(r.replicas.max()) for k, r in by_class.items()},
        }
        if any(r.refused for r in by_class.values()):
            summary[policy]["refused"] = {k: round(r.refused) for k, r in by_class.items()}
    return summary
