"""How late a run's scheduled sends started: from the queue's start times by arrival second, against their send_at."""

import numpy as np


def scheduled_lateness(starts, scheduled, arrivals, target_s):
    """Lateness of the scheduled sends of one pool: how long after the end of its ``send_at``'s second each started.

    ``starts`` are the queue's (arrival second, messages, start of the first, start of the last); ``scheduled`` the
    pool's ``traces.Scheduled``; ``arrivals`` its arrivals per second. A second's messages start in arrival order and
    its scheduled sends are spread among them as they arrived, so each chunk's share of scheduled sends is the
    second's, and their start times are uniform across the chunk's. The simulation resolves a second, and a mover
    publishes each second's sends during that second: a send started by the end of its ``send_at``'s second is on
    time (0). ``late`` counts the sends that started more than ``target_s`` (the pool's latency target) after it.
    """
    weights, low, high = [], [], []
    for origin, count, first, last in starts:
        sends = scheduled.counts[origin]
        if sends <= 0:
            continue
        deadline = scheduled.send_at[origin] + 1.0
        weights.append(count * sends / arrivals[origin])
        low.append(first - deadline)
        high.append(last - deadline)
    if not weights:
        return {"sends": 0, "p50_s": 0.0, "p99_s": 0.0, "max_s": 0.0, "late": 0}
    weights, low, high = np.array(weights), np.array(low), np.array(high)
    return {
        "sends": round(float(weights.sum())),
        "p50_s": round(_percentile(weights, low, high, 50), 3),
        "p99_s": round(_percentile(weights, low, high, 99), 3),
        "max_s": round(max(float(high.max()), 0.0), 3),
        "late": round(float(_above(weights, low, high, target_s))),
    }


def _percentile(weights, low, high, q):
    # Each chunk's values are uniform between its low and high: four points represent it, as the queue's waits.
    points = np.maximum(np.concatenate([low + (high - low) * (i + 0.5) / 4 for i in range(4)]), 0.0)
    mass = np.concatenate([weights / 4] * 4)
    order = np.argsort(points)
    cumulative = np.cumsum(mass[order])
    index = int(np.searchsorted(cumulative, cumulative[-1] * q / 100.0))
    return float(points[order][min(index, len(points) - 1)])


def _above(weights, low, high, threshold):
    """The weight of the values above ``threshold``, each chunk uniform between its low and high."""
    span = np.maximum(high - low, 1e-12)
    share = np.clip((high - threshold) / span, 0.0, 1.0)
    return float((weights * share).sum())
