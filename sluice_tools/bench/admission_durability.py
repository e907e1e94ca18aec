"""bench admission --durability: notify() with durability "async" against "replicated", interleaved in one run.

A private primary with one replica on loopback; both modes run on it, alternating in chunks of calls, so the only
difference is the WAIT that "replicated" sends in the same round trip as the admission script.
"""

import statistics
import time

from django.contrib.auth import get_user_model
from django.test import override_settings

from notifications import Outcome, notify
from pipeline.conf import CLASSES
from pipeline.connections import get_redis
from sluice_tools.bench.admission_bench import CHUNK, KIND, PAYLOAD, RoundTrips
from sluice_tools.redis_server import PrimaryWithReplica
from sluice_tools.redis_target import use_redis

from .common import percentile

MODES = ("async", "replicated")


def run(calls=3000, rounds=3, progress=None, timeout_ms=100):
    """Measure notify() in both modes ``rounds`` times, alternating in chunks; return rates, latencies, ratios."""
    from django.conf import settings

    pair = PrimaryWithReplica().start()
    previous = settings.SLUICE_REDIS_URL
    use_redis(pair.primary.url)
    try:
        return measure(calls, rounds, progress, timeout_ms)
    finally:
        use_redis(previous)
        pair.stop()


def queues(calls, mode, timeout_ms):
    # Room for every call: the accepted path, the one a web request takes normally.
    return {k: {"capacity": calls * 4, "durability": mode, "durability_timeout_ms": timeout_ms} for k in CLASSES}


def measure(calls, rounds, progress, timeout_ms):
    """The interleaved rounds of run()."""
    client = get_redis()
    user = get_user_model()(pk=1)
    rates = {mode: [] for mode in MODES}
    latencies = {mode: [] for mode in MODES}
    trips = dict.fromkeys(MODES, 0)
    settings_of = {mode: override_settings(SLUICE_QUEUES=queues(calls, mode, timeout_ms)) for mode in MODES}
    for mode in MODES:
        with settings_of[mode]:
            notify(user, KIND, entity_id=f"warm-up-{mode}", payload=PAYLOAD)  # scripts loaded, clients built
    for round_no in range(rounds):
        client.delete("routine")
        wall = dict.fromkeys(MODES, 0.0)
        # Interleaved in chunks, so that a neighbour's load on this shared machine falls on both modes alike.
        for first in range(0, calls, CHUNK):
            for mode in MODES:
                with settings_of[mode], RoundTrips() as counted:
                    started = time.perf_counter()
                    for i in range(first, min(first + CHUNK, calls)):
                        t = time.perf_counter()
                        outcome = notify(user, KIND, entity_id=f"{mode}-{i}", payload=PAYLOAD)
                        latencies[mode].append(time.perf_counter() - t)
                        assert outcome == Outcome.ACCEPTED, outcome
                    wall[mode] += time.perf_counter() - started
                trips[mode] += counted.count
        client.delete("routine")
        for mode in MODES:
            rates[mode].append(calls / wall[mode])
        if progress:
            progress(round_no + 1, rounds, {k: v[-1] for k, v in rates.items()})
    medians = {k: statistics.median(v) for k, v in rates.items()}
    figures = {
        "calls_per_round": calls,
        "rounds": rounds,
        "durability_timeout_ms": timeout_ms,
        "replicated_vs_async_rate": round(medians["replicated"] / medians["async"], 2),
    }
    for mode in MODES:
        figures[f"{mode}_per_s"] = round(medians[mode])
        figures[f"{mode}_p50_ms"] = round(percentile(latencies[mode], 50) * 1000, 3)
        figures[f"{mode}_p99_ms"] = round(percentile(latencies[mode], 99) * 1000, 3)
        figures[f"{mode}_round_trips_per_notify"] = round(trips[mode] / (calls * rounds), 3)
    return figures
