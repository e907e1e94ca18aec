"""Eight producer processes against a class on a real Redis Cluster: each partition's bound holds exactly (its share,
never above); and a routine flood on a plain Redis does not hold critical back on the cluster."""

import json
import multiprocessing
import threading
import time
from collections import Counter

import pytest

from notifications import notify
from pipeline.connections import get_redis
from pipeline.redis.cluster import partition_of
from sluice_tools.processes import WorkerProcess
from tests.cluster_helpers import (
    CHANNELS,
    CRITICAL,
    KINDS,
    PARTITIONS,
    User,
    cluster,  # noqa: F401  (the module's cluster)
    partition_depths,
    partitions,
    queues,
    sent,
    use_cluster,
)
from tests.producers import produce, produce_critical
from tests.waiting import wait_for

PRODUCERS = 8
CAPACITY = 600
EACH = 300  # 2,400 events for 600 places
ROUTINE = "task.comment"
FLOOD = 4 * 1500  # routine events from four processes, all waiting in the queue (none fold)


def spawn_env(monkeypatch, queue_settings):
    """What a spawned producer reads its settings from (settings/sluice.py)."""
    monkeypatch.setenv("SLUICE_QUEUES", json.dumps(queue_settings))
    monkeypatch.setenv("SLUICE_KINDS", json.dumps(KINDS))


@pytest.mark.expected_errors(r"critical queue .* full")
@pytest.mark.timeout(240)
def test_each_partition_is_bounded_exactly_across_eight_processes(cluster, settings, redis_server, monkeypatch):
    queue_settings = queues(cluster.url, redis_server.url, capacity=CAPACITY)
    use_cluster(settings, cluster, redis_server.url, queue_settings)
    spawn_env(monkeypatch, queue_settings)
    shares = [part.capacity for part in partitions()]
    peaks = [0] * PARTITIONS
    samples = 0
    stop = threading.Event()

    def watch():
        nonlocal samples
        while not stop.is_set():
            for i, depth in enumerate(partition_depths()):
                peaks[i] = max(peaks[i], depth)
            samples += 1

    watcher = threading.Thread(target=watch)
    watcher.start()
    context = multiprocessing.get_context("spawn")
    barrier = context.Manager().Barrier(PRODUCERS)
    try:
        with context.Pool(PRODUCERS) as pool:
            results = pool.starmap(produce_critical, [(EACH, f"p{n}", barrier) for n in range(PRODUCERS)])
    finally:
        stop.set()
        watcher.join()
    total = sum(results, Counter())
    depths = partition_depths()
    print(
        f"\nFIGURES cluster-producers processes={PRODUCERS} events={sum(total.values())} outcomes={dict(total)} "
        f"shares={shares} final_depths={depths} peak_depths={peaks} samples={samples}"
    )
    assert sum(total.values()) == PRODUCERS * EACH  # every call got a definite outcome
    assert total == {"accepted": CAPACITY, "rejected": PRODUCERS * EACH - CAPACITY}
    assert depths == shares
    assert all(peak <= share for peak, share in zip(peaks, shares, strict=True)), (peaks, shares)
    assert samples > 10


def one_user_per_partition():
    found = {}
    pk = 0
    while len(found) < PARTITIONS:
        pk += 1
        found.setdefault(partition_of(pk, PARTITIONS), pk)
    return sorted(found.values())


@pytest.mark.timeout(240)
def test_a_routine_flood_on_a_plain_redis_does_not_hold_critical_back(cluster, settings, redis_server, monkeypatch):
    queue_settings = queues(cluster.url, redis_server.url, capacity=CAPACITY)
    queue_settings["routine"] = {"capacity": FLOOD + 1000, "redis_url": redis_server.url}
    use_cluster(settings, cluster, redis_server.url, queue_settings)
    spawn_env(monkeypatch, queue_settings)
    slow = {name: {**conf, "options": {"latency_ms": 50}} for name, conf in CHANNELS.items()}
    env = {"SLUICE_KINDS": json.dumps(KINDS), "SLUICE_QUEUES": json.dumps(queue_settings)}
    # A slow routine pool (2 threads, 50 ms a send) keeps the flood waiting for minutes.
    routine = WorkerProcess("routine", redis_server.url, slow, env=env, extra=["--concurrency", "2"])
    critical = WorkerProcess("critical", redis_server.url, CHANNELS, env=env, extra=["--concurrency", "1"])
    plain = get_redis(redis_server.url)
    context = multiprocessing.get_context("spawn")
    try:
        routine.start()
        critical.start()
        with context.Pool(4) as pool:
            flood = pool.starmap_async(produce, [(ROUTINE, FLOOD // 4, 1, f"r{n}") for n in range(4)])
            wait_for(lambda: plain.llen("routine") > 1000, 60, what="the routine flood under way")
            published = {}
            for pk in one_user_per_partition():
                notify(User(pk=pk, username="u"), CRITICAL, entity_id=f"c{pk}")
                published[f"c{pk}"] = time.time()
            found = wait_for(lambda: delivered(redis_server.url, published), 30, what="every critical event sent")
            backlog = plain.llen("routine")
            routine_sent = sum(1 for record in sent(redis_server.url) if record["class"] == "routine")
            flooded = sum(flood.get(120), Counter())
    finally:
        critical.stop()
        routine.stop()
    latencies = sorted(round(found[e] - published[e], 3) for e in published)
    print(
        f"\nFIGURES cluster-isolation critical_latencies_s={latencies} routine_backlog_then={backlog} "
        f"routine_sent_then={routine_sent} routine_outcomes={dict(flooded)}"
    )
    assert max(latencies) < 5
    # Isolation, not luck: the flood was still waiting when every critical event had gone out.
    assert backlog > 1000
    assert routine_sent < 500
    assert not critical.problems(), critical.problems()


def delivered(plain_url, published):
    """{entity: when its send started} once every one of ``published`` was sent, else None."""
    started = {r["entity_id"]: r["started"] for r in sent(plain_url) if r["entity_id"] in published}
    return started if len(started) == len(published) else None
