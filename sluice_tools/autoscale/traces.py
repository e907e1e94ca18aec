"""Arrival traces: events per second per class, built in (incident, diurnal, monday, diurnal-incident, top-of-hour)
or from a CSV; a trace may carry scheduled sends, whose seconds are known before they come due."""

import csv
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

CLASSES = ("critical", "routine", "background")
# The traffic mix of DESIGN.md: reminders and OTPs, task events, board noise.
MIX = {"critical": 0.06, "routine": 0.80, "background": 0.14}


# Meetings start on the hour. Each has a reminder ten minutes before and one a minute before: (the second of the hour
# the reminders are due, how many on average, the kind's schedule_window_s: how early each may go).
HOURLY_REMINDERS = ((50 * 60, 4000, 120), (59 * 60, 1200, 30))
# SLUICE_SCHEDULE's defaults for critical: 55 sends a second, 0.8 of them reservable.
RESERVED_PER_S = 44


@dataclass(frozen=True)
class Scheduled:
    """A class's scheduled sends: ``counts[s]`` of them published at second ``s`` (their reserved second), each due
    at ``send_at[s]`` (NaN where none); ``refused`` could not be scheduled (no room in their window)."""

    counts: np.ndarray
    send_at: np.ndarray
    refused: int = 0

    def spikes(self):
        """The first second of each run of seconds that publish scheduled sends."""
        busy = self.counts > 0
        return [int(s) for s in np.flatnonzero(busy & ~np.concatenate(([False], busy[:-1])))]


@dataclass(frozen=True)
class Trace:
    """Arrivals per second: ``arrivals[klass][s]`` events of that class arrive during second ``s``.

    ``scheduled[klass]`` are the scheduled sends among them (a ``Scheduled``), which a pool can see coming.
    """

    name: str
    arrivals: dict
    scheduled: dict = field(default_factory=dict)

    @property
    def seconds(self):
        return len(self.arrivals[CLASSES[0]])

    def peak_rate(self, klass, window_s=60):
        """The highest mean arrival rate of ``klass`` over any ``window_s`` seconds, in events/s."""
        counts = self.arrivals[klass].astype(float)
        if len(counts) <= window_s:
            return float(counts.sum()) / max(len(counts), 1)
        sums = np.convolve(counts, np.ones(window_s), mode="valid")
        return float(sums.max()) / window_s


def _poisson_by_mix(rng, total_rate):
    """Poisson arrivals per second for each class, from a total rate per second split by MIX."""
    return {k: rng.poisson(total_rate * MIX[k]).astype(np.int64) for k in CLASSES}


def _add_burst(rng, arrivals, at_s, events=9360, burst_s=40):
    """Add the incident's burst at ``at_s``: exactly ``events`` spread evenly over ``burst_s`` seconds, split by MIX."""
    cells = [MIX[k] / burst_s for k in CLASSES for _ in range(burst_s)]
    counts = rng.multinomial(events, cells).reshape(len(CLASSES), burst_s)
    for i, klass in enumerate(CLASSES):
        arrivals[klass][at_s : at_s + burst_s] += counts[i]
    return arrivals


def incident(seed=7, duration_s=1800, burst_at_s=300):
    """The incident: 90 events/min of steady traffic, then 9,360 events in 40 s (6/80/14 %)."""
    rng = np.random.default_rng(seed)
    arrivals = _poisson_by_mix(rng, np.full(duration_s, 90 / 60))
    return Trace("incident", _add_burst(rng, arrivals, burst_at_s))


def diurnal_rate(seconds, trough=3.0, peak=250.0):
    """Total events/s over a day: ``trough`` at night, a raised cosine from 06:00 to 22:00 peaking at 14:00."""
    hours = np.arange(seconds) / 3600.0
    phase = np.clip((hours - 6.0) / 16.0, 0.0, 1.0)
    return trough + (peak - trough) * 0.5 * (1.0 - np.cos(2.0 * math.pi * phase))


def monday_rate(seconds, trough=3.0, peak=250.0, surge=1.2):
    """The diurnal rate, with Monday morning on top: from 07:30 a steep climb to ``surge`` × the peak at 09:00.

    After a quiet weekend everyone opens their tasks at once: the rate climbs from 24 to 300
    events/s in 90 minutes (at its steepest six times as fast as the ordinary day's climb), holds
    until 09:30, and eases back onto the ordinary day by 11:30.
    """
    rate = diurnal_rate(seconds, trough, peak)
    hours = np.arange(seconds) / 3600.0
    rise = np.clip((hours - 7.5) / 1.5, 0.0, 1.0)
    fall = np.clip((hours - 9.5) / 2.0, 0.0, 1.0)
    shape = 0.5 * (1.0 - np.cos(math.pi * rise)) * 0.5 * (1.0 + np.cos(math.pi * fall))
    return np.maximum(rate, trough + (surge * peak - trough) * shape)


def _with_spikes(rng, rate, spikes_per_hour):
    """Double ``rate`` for 20-60 s at Poisson-distributed moments between 08:00 and 20:00 (in place)."""
    start, end = 8 * 3600, min(20 * 3600, len(rate))
    t = float(start)
    while end > start and spikes_per_hour > 0:
        t += rng.exponential(3600.0 / spikes_per_hour)
        if t >= end:
            break
        length = int(rng.integers(20, 61))
        rate[int(t) : int(t) + length] *= 2.0
    return rate


def diurnal(seed=7, duration_s=86400, spikes_per_hour=1.0):
    """A working day of traffic with local spikes (bulk edits) that double the rate for 20-60 s.

    Spikes arrive as a Poisson process between 08:00 and 20:00. They are the "local spikes" that
    scaling on instant depth chases and scaling on windowed latency should ride out.
    """
    rng = np.random.default_rng(seed)
    rate = _with_spikes(rng, diurnal_rate(duration_s), spikes_per_hour)
    return Trace("diurnal", _poisson_by_mix(rng, rate))


def monday(seed=7, duration_s=86400, spikes_per_hour=1.0):
    """A Monday: the diurnal day with its spikes, and the morning ramp of ``monday_rate``."""
    rng = np.random.default_rng(seed)
    rate = _with_spikes(rng, monday_rate(duration_s), spikes_per_hour)
    return Trace("monday", _poisson_by_mix(rng, rate))


def diurnal_incident(seed=7, duration_s=86400):
    """The diurnal day of ``seed``, with the incident's burst (9,360 events in 40 s) riding on top.

    The burst lands at a moment drawn from the seed between 09:00 and 17:00, so each seed puts
    it at another point of the day, on the climb, at the peak or on the way down.
    """
    day = diurnal(seed=seed, duration_s=duration_s)
    rng = np.random.default_rng([seed, 9360])  # its own stream: the day stays the diurnal trace's
    latest = max(min(17 * 3600, duration_s - 40), 0)
    at_s = int(rng.integers(min(9 * 3600, latest), latest + 1))
    arrivals = {k: v.copy() for k, v in day.arrivals.items()}
    return Trace("diurnal-incident", _add_burst(rng, arrivals, at_s))


def reserve(counts, send_at, due_s, sends, window_s, per_s):
    """Reserve ``sends`` scheduled sends due at second ``due_s`` as Sluice does: the latest second first, at most
    ``per_s`` a second, within the ``window_s`` seconds that end with ``due_s`` (in place). Returns those refused.

    A second that holds sends due at another time is passed over, so each second's sends share one ``send_at``.
    """
    left = sends
    for second in range(due_s, max(due_s - max(window_s, 1), -1), -1):
        if left == 0:
            break
        if counts[second] and send_at[second] != due_s:
            continue
        take = min(per_s - int(counts[second]), left)
        if take > 0:
            counts[second] += take
            send_at[second] = due_s
            left -= take
    return left


def top_of_hour(seed=7, hours=3, rate=100.0, reminders=HOURLY_REMINDERS, reserved_per_s=RESERVED_PER_S):
    """Meetings start on the hour: every hour critical reminders spike at :50 and :59, on an ordinary load.

    The ordinary load is ``rate`` events/s (Poisson, split by MIX). The reminders are scheduled sends whose count
    each hour is drawn around ``reminders``' means; each is reserved as Sluice reserves it (``reserve``), so it is
    published at its reserved second, known from the moment it was scheduled: what the chart's scheduled trigger
    reads on ``/scaler/<queue>``.
    """
    rng = np.random.default_rng(seed)
    seconds = hours * 3600
    arrivals = _poisson_by_mix(rng, np.full(seconds, rate))
    counts = np.zeros(seconds, dtype=np.int64)
    send_at = np.full(seconds, np.nan)
    refused = 0
    for hour in range(hours):
        for at_s, mean, window_s in reminders:
            refused += reserve(counts, send_at, hour * 3600 + at_s, int(rng.poisson(mean)), window_s, reserved_per_s)
    arrivals["critical"] = arrivals["critical"] + counts
    return Trace("top-of-hour", arrivals, {"critical": Scheduled(counts, send_at, refused)})


def from_csv(path):
    """A trace from a CSV file with a header naming ``second`` and any of the class columns.

    Each row gives the events of each class arriving during that second; missing seconds and
    missing class columns count as zero.
    """
    path = Path(path)
    rows = []
    with path.open(newline="") as handle:
        reader = csv.DictReader(handle)
        if not reader.fieldnames or "second" not in reader.fieldnames:
            raise ValueError(f"{path}: the header must name a 'second' column")
        unknown = set(reader.fieldnames) - {"second", *CLASSES}
        if unknown:
            raise ValueError(f"{path}: unknown columns {sorted(unknown)}; use second and {list(CLASSES)}")
        for line, row in enumerate(reader, start=2):
            try:
                second = int(row["second"])
                counts = {k: int(row.get(k) or 0) for k in CLASSES}
            except ValueError as exc:
                raise ValueError(f"{path}:{line}: {exc}") from exc
            if second < 0 or any(v < 0 for v in counts.values()):
                raise ValueError(f"{path}:{line}: seconds and counts must not be negative")
            rows.append((second, counts))
    if not rows:
        raise ValueError(f"{path}: no rows")
    length = max(second for second, _ in rows) + 1
    arrivals = {k: np.zeros(length, dtype=np.int64) for k in CLASSES}
    for second, counts in rows:
        for klass, n in counts.items():
            arrivals[klass][second] += n
    return Trace(path.stem, arrivals)


BUILT_IN = {
    "incident": incident,
    "diurnal": diurnal,
    "monday": monday,
    "diurnal-incident": diurnal_incident,
    "top-of-hour": top_of_hour,
}


def load(name, seed=7):
    """A built-in trace by name (``BUILT_IN``), or the path of a CSV file."""
    if name in BUILT_IN:
        return BUILT_IN[name](seed=seed)
    return from_csv(name)
