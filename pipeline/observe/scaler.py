"""KEDA's metrics-api JSON for one queue (/scaler/<queue>): latency, busy slots, and the scheduled load ahead.

The scheduled load is what lets a pool grow before a spike of reminders rather than after it: the sends due within
the look-ahead (``?within=``, seconds) are known when they are scheduled, so the exporter reads them, finds their
busiest ``?span=`` seconds, and turns that rate into the worker slots it will keep busy (× the measured seconds of
sending per message), which the chart's scheduled trigger scales on beside the capacity floor.
"""

import math
import re
import time
from itertools import accumulate
from urllib.parse import parse_qs

from pipeline.broker.depth import depth, queue_redis
from pipeline.conf import sluice_settings
from pipeline.observe.window import RETAIN_S, class_of, queue_age, window
from pipeline.redis import keys

# Without ?within= and ?span=: the chart's default look-ahead, and one second (what critical reserves by).
DEFAULT_WITHIN_S = 300
DEFAULT_SPAN_S = 1
# A staged class's sends are counted in at most this many bins of the look-ahead (one ZCOUNT each, one round trip).
MAX_BINS = 900
PARAMETERS = ("within", "span")


class BadQuery(ValueError):
    """A /scaler query parameter that is unknown, repeated, or out of its range; the message names it."""


def parse_query(query, staged_s):
    """(within, span) in whole seconds from a query string: ``within`` from 1 to ``staged_s`` (what Redis holds of
    the scheduled sends: SLUICE_SCHEDULE["staged_s"]), ``span`` from 1 to ``within``. Raises BadQuery."""
    try:
        found = parse_qs(query or "", keep_blank_values=True, strict_parsing=bool(query))
    except ValueError as exc:
        raise BadQuery(f"the query {query!r} is not name=value pairs") from exc
    unknown = sorted(set(found) - set(PARAMETERS))
    if unknown:
        raise BadQuery(f"unknown parameter {unknown[0]!r}: /scaler/<queue> takes within and span (seconds)")
    within = _seconds(found, "within", min(DEFAULT_WITHIN_S, staged_s), staged_s)
    return within, _seconds(found, "span", DEFAULT_SPAN_S, within)


def _seconds(found, name, default, top):
    given = found.get(name)
    if given is None:
        return default
    if len(given) > 1:
        raise BadQuery(f"{name} is given {len(given)} times")
    if not re.fullmatch(r"[0-9]{1,9}", given[0]) or not 1 <= int(given[0]) <= top:
        raise BadQuery(f"{name} must be whole seconds from 1 to {top}, got {given[0]!r}")
    return int(given[0])


def scheduled_ahead(klass, within, span, now, client):
    """(sends due within the next ``within`` s, the most of them due in any ``span`` s of it, per second).

    The count is sluice_scheduled_due's: for critical, the places reserved in those seconds, one count a second
    (the mover publishes each second's as it comes); for the other classes, their staged sends, in bins.
    """
    if klass == "critical":
        first = int(now)
        seconds = client.zrangebyscore(keys.scheduled_seconds(klass), first, int(now + within))
        reserved = client.hmget(keys.scheduled_slots(klass), seconds) if seconds else []
        counts = [0] * (int(now + within) - first + 1)
        for second, n in zip(seconds, reserved, strict=True):
            counts[int(second) - first] += int(n or 0)
        bin_s = 1
    else:
        bin_s = math.ceil(within / MAX_BINS)
        edges = [now + i * bin_s for i in range(math.ceil(within / bin_s))] + [now + within]
        pipe = client.pipeline(transaction=False)
        for i, low in enumerate(edges[:-1]):
            # Each bin is [low, high), the last one [low, now + within], so the bins add up to staged_within's count.
            high = edges[i + 1] if i == len(edges) - 2 else f"({edges[i + 1]}"
            pipe.zcount(keys.scheduled_due(klass), low, high)
        counts = pipe.execute()
    width = max(1, min(len(counts), math.ceil(span / bin_s)))
    sums = [0, *accumulate(counts)]
    busiest = max(sums[i + width] - sums[i] for i in range(len(counts) - width + 1))
    return sums[-1], busiest / (width * bin_s)


def scaler_payload(queue, window_s, floor_window_s=None, query=""):
    """What KEDA's metrics-api trigger reads for ``queue``; None when the queue is unknown. Raises BadQuery.

    ``busy_slots`` is averaged over ``floor_window_s`` (the latency window when None); ``busy_slots_ahead`` adds
    the slots the busiest ``span`` seconds of the scheduled sends due within ``within`` seconds will keep busy.
    """
    klass = class_of(queue)
    if klass is None:
        return None
    settings = sluice_settings()
    within, span = parse_query(query, settings.schedule.staged_s)
    client = queue_redis(queue)  # on a Redis Cluster, the class's first partition: the scheduled sends' index
    now = time.time()
    floor_window_s = floor_window_s or window_s
    # Each read across every partition of a class on a Redis Cluster: the worst latency, the summed busy slots.
    stats = window(queue, window_s, now)
    floor = stats if floor_window_s == window_s else window(queue, floor_window_s, now)
    age = queue_age(queue, now)[0]
    drain = stats.drain_time_s
    due, peak = scheduled_ahead(klass, within, span, now, client)
    per_message = floor.send_seconds_per_message
    if not per_message and due:
        # Nothing sent over the floor window: the send time of every sample kept (an hour at least). A pool that
        # sent nothing in that long has none, and reads no scheduled slots: its latency still scales it.
        per_message = window(queue, max(RETAIN_S, floor_window_s), now).send_seconds_per_message
    scheduled_slots = peak * per_message
    return {
        "queue": queue,
        "class": klass,
        "latency_seconds": round(age, 3),
        "latency_window_avg_seconds": round(stats.latency_avg_s, 3),
        "latency_window_max_seconds": round(max(stats.latency_max_s, age), 3),
        "depth": depth(klass),
        "capacity": settings.queues[klass].capacity,
        # JSON has no infinity; a queue that is not draining at all reports a day.
        "drain_time_seconds": round(drain, 3) if math.isfinite(drain) else 86400.0,
        "busy_slots": round(floor.busy_slots, 3),
        "window_seconds": window_s,
        "floor_window_seconds": floor_window_s,
        "scheduled_within_seconds": within,
        "scheduled_span_seconds": span,
        "scheduled_due": due,
        "scheduled_peak_per_second": round(peak, 3),
        "send_seconds_per_message": round(per_message, 4),
        "scheduled_busy_slots": round(scheduled_slots, 3),
        "busy_slots_ahead": round(floor.busy_slots + scheduled_slots, 3),
    }
