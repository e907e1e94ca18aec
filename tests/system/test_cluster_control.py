"""Remote control of a worker whose class is on a real Redis Cluster: `celery inspect` reaches it over the cluster's
pub/sub, and its reply comes back through a reply queue on the cluster."""

import json
import subprocess
import sys

import pytest

from pipeline.connections import get_redis
from sluice_tools.processes import ROOT, WorkerProcess
from sluice_tools.redis_cluster import RedisCluster, cluster_support
from tests.conftest import need
from tests.integration.test_per_class_redis import CHANNELS, KINDS


@pytest.fixture(scope="module")
def cluster():
    reason = cluster_support()
    if reason:
        need(reason)
    started = RedisCluster().start()
    yield started
    started.stop()


@pytest.mark.timeout(120)
def test_celery_inspect_reaches_a_worker_on_the_cluster(cluster, redis_server):
    get_redis(redis_server.url).flushdb()
    queues = {
        "critical": {"capacity": 60, "redis_url": cluster.url, "partitions": 3},
        "routine": {"redis_url": redis_server.url},
        "background": {"redis_url": redis_server.url},
    }
    env = {"SLUICE_KINDS": json.dumps(KINDS), "SLUICE_QUEUES": json.dumps(queues)}
    worker = WorkerProcess("critical", redis_server.url, CHANNELS, env=env).start()
    try:
        asked = subprocess.run(
            [sys.executable, "-m", "celery", "-A", "pipeline", "inspect", "active_queues", "--timeout", "5", "--json"],
            cwd=ROOT,
            env={**worker.env, "CELERY_BROKER_URL": ""},
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        worker.stop()
    assert asked.returncode == 0, asked.stderr[-2000:]
    [(name, consumed)] = json.loads(asked.stdout.strip().splitlines()[-1]).items()
    assert name.startswith("critical@")
    assert sorted(q["name"][q["name"].index("}") + 1 :] for q in consumed) == ["critical"] * 3
    assert not worker.problems(), worker.problems()
