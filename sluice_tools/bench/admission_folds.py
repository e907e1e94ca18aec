"""bench admission --folds: notify() on its folded path, the folds on the class's Redis against on the digest's own.

Routine's queue is full for the whole run, so every call folds. The two placements alternate in chunks of calls in
one run (SLUICE_DIGEST without and with "redis_url"); the digest's Redis is a private redis-server of its own.
"""

import statistics
import time

from django.contrib.auth import get_user_model
from django.test import override_settings

from notifications import Outcome, notify
from pipeline.conf import CLASSES
from pipeline.connections import get_redis
from pipeline.redis import keys
from sluice_tools.bench.admission_bench import CHUNK, KIND, PAYLOAD, USERS, RoundTrips
from sluice_tools.redis_server import RedisServer

from .common import percentile

ENTITIES = 100
# No size-triggered flush (it would publish a task nobody runs here) and a store far from its bound, so every
# call takes the same path: a fold at the entity's grain.
DIGEST = {"flush_interval_s": 3600, "max_keys": 10**9, "max_fold_keys": 10**7}
PATHS = ("here", "elsewhere")


def run(calls=3000, rounds=3, progress=None):
    """Measure the folded path with the folds here and elsewhere, ``rounds`` times, alternating in chunks."""
    server = RedisServer().start()
    try:
        return measure(server.url, calls, rounds, progress)
    finally:
        server.stop()


def measure(digest_url, calls, rounds, progress):
    """The interleaved rounds of run(); ``digest_url`` is the digest's own Redis."""
    User = get_user_model()
    users = [User(pk=n) for n in range(1, USERS + 1)]
    digests = {"here": DIGEST, "elsewhere": {**DIGEST, "redis_url": digest_url}}
    queues = {klass: {"capacity": 1} for klass in CLASSES}
    kinds = {KIND: {"class": "routine", "channels": ["email", "push"]}}
    rates = {path: [] for path in PATHS}
    cpu_us = {path: [] for path in PATHS}
    latencies = {path: [] for path in PATHS}
    trips = dict.fromkeys(PATHS, 0)
    with override_settings(SLUICE_QUEUES=queues, SLUICE_KINDS=kinds):
        notify(users[0], KIND, entity_id="fill", payload=PAYLOAD)  # routine's queue of one is full from now on
        for path in PATHS:
            with override_settings(SLUICE_DIGEST=digests[path]):
                notify(users[0], KIND, entity_id="warm-up", payload=PAYLOAD)  # the scripts loaded
        for round_no in range(rounds):
            wall, cpu = dict.fromkeys(PATHS, 0.0), dict.fromkeys(PATHS, 0.0)
            for first in range(0, calls, CHUNK):
                for path in PATHS:
                    with override_settings(SLUICE_DIGEST=digests[path]), RoundTrips() as counted:
                        started, started_cpu = time.perf_counter(), time.process_time()
                        for i in range(first, min(first + CHUNK, calls)):
                            t = time.perf_counter()
                            outcome = notify(users[i % USERS], KIND, entity_id=f"e{i % ENTITIES}", payload=PAYLOAD)
                            latencies[path].append(time.perf_counter() - t)
                            if outcome != Outcome.FOLDED:
                                raise RuntimeError(f"bench admission --folds: a call was {outcome}, not folded")
                        wall[path] += time.perf_counter() - started
                        cpu[path] += time.process_time() - started_cpu
                    trips[path] += counted.count
            for path in PATHS:
                rates[path].append(calls / wall[path])
                cpu_us[path].append(cpu[path] / calls * 1e6)
            if progress:
                progress(round_no + 1, rounds, {k: v[-1] for k, v in rates.items()})
        _clean(get_redis(), get_redis(digest_url))
    medians = {path: statistics.median(rates[path]) for path in PATHS}
    return {
        "fold_here_per_s": round(medians["here"]),
        "fold_elsewhere_per_s": round(medians["elsewhere"]),
        "elsewhere_vs_here": round(medians["elsewhere"] / medians["here"], 2),
        **{f"fold_{path}_p50_ms": round(percentile(latencies[path], 50) * 1000, 3) for path in PATHS},
        **{f"fold_{path}_p99_ms": round(percentile(latencies[path], 99) * 1000, 3) for path in PATHS},
        "producer_cpu_us_per_call": {path: round(statistics.median(cpu_us[path]), 1) for path in PATHS},
        "round_trips_per_notify": {path: round(trips[path] / (calls * rounds), 3) for path in PATHS},
        "calls_per_round": calls,
        "rounds": rounds,
    }


def _clean(*clients):
    for client in clients:
        client.delete("routine", keys.pending(), keys.fold_store_size())
        for key in client.scan_iter(match=keys.fold("*"), count=1000):
            client.delete(key)
