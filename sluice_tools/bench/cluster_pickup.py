"""An idle critical pool's pickup latency, from notify() to the send's start, on one Redis and on a Redis Cluster of 3
primaries in one run: the cluster's partition channels block on their partitions as one Redis's fetch does."""

import time

from django.contrib.auth import get_user_model
from django.test import override_settings

from notifications import notify
from pipeline.connections import get_redis, reset
from sluice_tools.processes import WorkerProcess
from sluice_tools.redis_cluster import RedisCluster

from .common import percentile
from .incident import SEND_LATENCY_MS, settings_for, worker_env
from .provider import SENT_KEY, sent_records

PARTITIONS = 12


def run(probes=40, rounds=3, progress=None):
    """Alternating rounds of ``probes`` single critical events, one at a time on an idle pool, on each target; the
    p50 and p99 of each target over all its rounds, and their ratio."""
    cluster = RedisCluster().start()
    try:
        found = {"one_redis": [], "cluster": []}
        for done in range(rounds):
            for target in found:
                found[target] += _round(cluster.url if target == "cluster" else None, probes)
            if progress:
                progress(done + 1, rounds)
    finally:
        cluster.stop()
        reset()
    result = {
        target: {
            "p50_ms": round(percentile(latencies, 50), 2),
            "p99_ms": round(percentile(latencies, 99), 2),
            "samples": len(latencies),
        }
        for target, latencies in found.items()
    }
    result["cluster_vs_one_redis_p50"] = round(result["cluster"]["p50_ms"] / result["one_redis"]["p50_ms"], 2)
    result["cluster_vs_one_redis_p99"] = round(result["cluster"]["p99_ms"] / result["one_redis"]["p99_ms"], 2)
    result["probes"], result["rounds"], result["partitions"] = probes, rounds, PARTITIONS
    return result


def _round(cluster_url, probes):
    """One round's latencies in ms: a fresh critical worker on the target, ``probes`` events one after another."""
    conf = settings_for("sluice", 60)
    if cluster_url:
        conf["SLUICE_QUEUES"] = {
            **conf["SLUICE_QUEUES"],
            "critical": {**conf["SLUICE_QUEUES"]["critical"], "redis_url": cluster_url, "partitions": PARTITIONS},
        }
    recorder = get_redis()
    recorder.delete(SENT_KEY)
    with override_settings(**conf):
        reset()
        worker = WorkerProcess("critical", recorder_url(), env=worker_env(conf)).start()
        try:
            time.sleep(1.0)  # the worker's first fetch is out on every partition
            User = get_user_model()
            for i in range(probes):
                # A new user each time: on the cluster the events go to every partition in turn.
                notify(User(pk=i + 1), "meeting.reminder", entity_id=f"idle-{i}", payload={"t0": time.time()})
                time.sleep(SEND_LATENCY_MS / 1000 + 0.1)  # the pool is idle again before the next one
            deadline = time.monotonic() + 30
            while recorder.llen(SENT_KEY) < probes and time.monotonic() < deadline:
                time.sleep(0.05)
        finally:
            worker.stop()
        reset()
    return [(r["started"] - r["t0"]) * 1000 for r in sent_records(recorder)]


def recorder_url():
    """SLUICE_REDIS_URL: where the bench's provider records its sends, and the workers' plain Redis."""
    from pipeline.conf import sluice_settings

    return sluice_settings().redis_url
