"""Remote control of a worker whose class is on a real Redis Cluster: `celery inspect` reaches it over the cluster's
pub/sub, and its reply comes back through a reply queue on the cluster."""

import json
import subprocess
import sys

import pytest

from pipeline.connections import get_redis
from sluice_tools.bench.provider import SENT_KEY
from sluice_tools.processes import ROOT, WorkerProcess
from tests.cluster_helpers import acl_log, add_acl_user, cluster  # noqa: F401  (the module's cluster)
from tests.integration.test_per_class_redis import CHANNELS, KINDS
from tests.waiting import wait_for


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


@pytest.mark.timeout(120)
def test_the_documented_acl_user_runs_a_class_on_the_cluster(cluster, redis_server, settings):
    from django.contrib.auth import get_user_model

    from notifications import notify
    from pipeline.connections import reset

    add_acl_user(cluster, "cluster-pw")
    url = cluster.url.replace("redis+cluster://", "redis+cluster://sluice:cluster-pw@")
    queues = {
        "critical": {"capacity": 60, "redis_url": url, "partitions": 3},
        "routine": {"redis_url": redis_server.url},
        "background": {"redis_url": redis_server.url},
    }
    get_redis(redis_server.url).flushdb()
    settings.SLUICE_KINDS, settings.SLUICE_CHANNELS, settings.SLUICE_QUEUES = KINDS, CHANNELS, queues
    reset()
    env = {"SLUICE_KINDS": json.dumps(KINDS), "SLUICE_QUEUES": json.dumps(queues)}
    worker = WorkerProcess("critical", redis_server.url, CHANNELS, env=env).start()
    try:
        for pk in range(1, 31):
            notify(get_user_model()(pk=pk), "meeting.reminder", entity_id="acl", payload={})
        sent = get_redis(redis_server.url)
        wait_for(lambda: sent.llen(SENT_KEY) >= 30, 60, what="the 30 sends")
    finally:
        worker.stop()
        reset()
    refused = acl_log(cluster)
    assert refused == [], refused[:3]
    assert not worker.problems(), worker.problems()
