"""The simulation: each class's queue and pool, one second at a time, under one scaling policy."""

import itertools
import math
from collections import deque
from dataclasses import dataclass, field, replace

import numpy as np

from .config import HPA_SYNC_S, depth_scaling
from .hpa import Autoscaler
from .lateness import scheduled_lateness
from .queue import FluidQueue
from .traces import CLASSES

POLICIES = ("windowed_latency", "instant_depth", "fixed_peak")
# Windowed latency and the floor, plus the scheduled trigger on every pool: run beside windowed latency (without it)
# on a trace with scheduled sends. On a trace without any it reads the floor's busy slots and changes nothing.
SCHEDULED_POLICY = "windowed_scheduled"
# The exporter's fallback for the send time: every sample kept, an hour at least (pipeline.observe.window.RETAIN_S).
SEND_TIME_MEMORY_S = 3600
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
    # With scheduled sends: their lateness (lateness.scheduled_lateness), and the ready pods at each spike's first
    # second (when its first reserved second comes, so the pool has or has not grown before it).
    scheduled: dict | None = None

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


class BusySlotsAhead:
    """The exporter's ``busy_slots_ahead`` (``/scaler/<queue>?within=&span=``), from scheduled sends known ahead.

    The most scheduled sends published in any ``span_s`` seconds of the next ``lookahead_s``, per second, × the
    seconds of sending per message (none once the pool has sent nothing for SEND_TIME_MEMORY_S), plus the floor's
    busy slots when the pool has a floor (the chart then reads ``busy_slots_ahead``, else ``scheduled_busy_slots``).
    """

    def __init__(self, counts, lookahead_s, span_s, mu, slots, with_floor, floor_window_s):
        self._sums = np.concatenate(([0], np.cumsum(counts)))
        self.lookahead_s, self.span_s = lookahead_s, span_s
        self.seconds_per_message = slots / mu if mu > 0 else 0.0
        self.with_floor = with_floor
        self._served = SlidingSum(max(SEND_TIME_MEMORY_S, floor_window_s))

    def push(self, now, served):
        self._served.push(now, served)

    def peak(self, now):
        """The busiest ``span_s`` seconds of the look-ahead, per second: seconds int(now) to int(now + lookahead)."""
        first = int(now)
        last = min(int(now + self.lookahead_s), len(self._sums) - 2)
        if last < first:
            return 0.0
        width = min(self.span_s, last - first + 1)
        ends = self._sums[first + width : last + 2]
        starts = self._sums[first : last + 2 - width]
        return float((ends - starts).max()) / width

    def read(self, now, busy_slots):
        measured = self.seconds_per_message if self._served.total > 1e-9 else 0.0
        return (busy_slots if self.with_floor else 0.0) + self.peak(now) * measured


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
    scheduled=None,
):
    """Simulate one pool under ``policy``: ``scaling`` is its chart ``hpa.Scaling``, ``slots`` its concurrency.

    Latency is read over ``window_s``; busy slots over ``floor_window_s`` (the exporter's
    ``--floor-window``), the latency window when None. ``scheduled`` are the pool's scheduled sends among its
    arrivals (a ``traces.Scheduled``): the scheduled trigger sees them coming, and the run reports their lateness.
    """
    seconds = len(arrivals)
    out = ClassRun(*(np.zeros(seconds) for _ in range(4)))
    queue = FluidQueue(capacity, track_starts=scheduled is not None)
    floor_window_s = floor_window_s or window_s
    target_s = scaling.target  # the latency target, before instant depth's twin turns it into a depth
    if policy != SCHEDULED_POLICY:
        scaling = replace(scaling, scheduled_target=None, scheduled_activation=None)
    ahead = None
    if scaling.scheduled_target is not None:
        counts = scheduled.counts if scheduled is not None else np.zeros(seconds)
        with_floor = scaling.floor_target is not None
        ahead = BusySlotsAhead(counts, scaling.lookahead_s, scaling.span_s, mu, slots, with_floor, floor_window_s)
    if policy == "fixed_peak":
        controller, start = None, fixed
    else:
        if policy == "instant_depth":
            scaling = depth_scaling(scaling, mu)
        controller = Autoscaler(scaling, scaling.min_replicas)
        start = scaling.min_replicas
    pods = Pods(start)
    window = SlidingMax(window_s)
    busy = BusySlots(floor_window_s, mu, slots)
    for second in range(seconds):
        now = second + 1.0
        ready = pods.ready(second)
        depth, refused = queue.depth, queue.refused
        queue.tick(second, float(arrivals[second]), ready * mu)
        admitted = float(arrivals[second]) - (queue.refused - refused)
        latency = queue.oldest_age(now)
        windowed = window.push(now, latency)
        served = depth + admitted - queue.depth
        busy_slots = busy.push(now, admitted, served)
        if ahead is not None:
            ahead.push(now, served)
        if controller is not None:
            metric = queue.depth if policy == "instant_depth" else windowed
            change = 0
            polled, synced = second % polling_s == polling_s - 1, second % HPA_SYNC_S == HPA_SYNC_S - 1
            # Each trigger is read only where the scaling has it (instant depth has neither the floor nor this).
            looking = ahead.read(now, busy_slots) if ahead is not None and (polled or synced) else None
            if polled:
                change = controller.poll(now, metric, busy_slots, looking)
            if synced:
                change += controller.sync(now, metric, pods.ready(now), busy_slots, looking)
            if change:
                pods.resize(now, controller.replicas, startup_s)
                out.events.append((now, change))
        out.replicas[second] = len(pods.ready_at)
        out.ready[second] = ready
        out.latency[second] = latency
        out.depth[second] = queue.depth
    out.p99_s = queue.percentile(99)
    out.refused = queue.refused
    if scheduled is not None:
        out.scheduled = {
            **scheduled_lateness(queue.starts, scheduled, arrivals, target_s),
            "ready_at_first_due": [int(out.ready[s]) for s in scheduled.spikes()],
        }
    return out


def policies_for(trace):
    """The policies a trace is run under: windowed latency with and without the scheduled trigger side by side
    when it has scheduled sends."""
    if not trace.scheduled:
        return POLICIES
    return (POLICIES[0], SCHEDULED_POLICY, *POLICIES[1:])


def simulate(trace, scaling, mu, *, startup_s=30, capacity=None, policies=None):
    """Every policy over ``trace`` (``policies_for(trace)`` by default): ``{policy: {class: ClassRun}}``."""
    sizes = fixed_sizes(trace, scaling, mu)
    runs = {}
    for policy in policies or policies_for(trace):
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
                scheduled=trace.scheduled.get(klass),
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
        scheduled = {k: r.scheduled for k, r in by_class.items() if r.scheduled is not None}
        if scheduled:
            summary[policy]["scheduled"] = scheduled
    return summary
