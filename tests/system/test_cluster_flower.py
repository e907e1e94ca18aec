"""Flower on a class on a real Redis Cluster: `manage.py flower` sees the class's worker (remote control over the
cluster's pub/sub) and every task it ran (Celery's events, published to the primaries in turn, reach Flower's
receiver on whichever node it listens); its broker page, which reads one Redis, says that it does not support this
broker (docs/scaling.md)."""

import base64
import json
import sys
import urllib.error
import urllib.request

import pytest
from django.contrib.auth import get_user_model

from notifications import Outcome, notify
from sluice_tools.processes import ROOT, ManagedProcess
from sluice_tools.redis_server import free_port
from tests.cluster_helpers import CHANNELS, KINDS, cluster, queues, start_worker, use_cluster  # noqa: F401
from tests.waiting import wait_for

User = get_user_model()
LOGIN = "ops:correct-horse"
EVENTS = 30


def flower_get(port, path):
    token = base64.b64encode(LOGIN.encode()).decode()
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers={"Authorization": f"Basic {token}"})
    with urllib.request.urlopen(request, timeout=10) as answer:
        return answer.status, answer.read().decode()


def succeeded(port):
    _, body = flower_get(port, "/api/tasks?state=SUCCESS&limit=1000")
    return json.loads(body)


@pytest.mark.timeout(180)
def test_flower_sees_the_worker_and_every_task_of_a_class_on_the_cluster(cluster, redis_server, settings):
    on_cluster = queues(cluster.url, redis_server.url)
    use_cluster(settings, cluster, redis_server.url, on_cluster)
    port = free_port()
    environment = {
        "REDIS_URL": redis_server.url,
        "SLUICE_KINDS": json.dumps(KINDS),
        "SLUICE_CHANNELS": json.dumps(CHANNELS),
        "SLUICE_QUEUES": json.dumps(on_cluster),
        "FLOWER_BASIC_AUTH": LOGIN,
    }
    flower = ManagedProcess(
        "flower-cluster",
        [sys.executable, str(ROOT / "manage.py"), "flower", f"--port={port}", "--address=127.0.0.1"],
        env=environment,
        ready_text="Visit me at",
    )
    flower.env.pop("CELERY_BROKER_URL", None)
    flower.start()
    worker = start_worker(on_cluster, redis_server.url)
    try:
        for pk in range(1, EVENTS + 1):
            assert notify(User(pk=pk, username="u"), "meeting.reminder", entity_id=f"f{pk}") is Outcome.ACCEPTED
        wait_for(lambda: len(succeeded(port)) >= EVENTS, 90, what="Flower to see every task succeed")
        _, workers = flower_get(port, "/api/workers?refresh=1")
        [(name, seen)] = json.loads(workers).items()
        assert name.startswith("critical@")
        consumed = sorted(queue["name"] for queue in seen["active_queues"])
        assert [name[name.index("}") + 1 :] for name in consumed] == ["critical"] * 6
        # Flower's broker page reads queue lengths with a client of one Redis, which a cluster is not: Flower says
        # so itself, as for any broker it does not support (sluice_queue_depth and sluice_partition_depth read them).
        with pytest.raises(urllib.error.HTTPError) as unsupported:
            flower_get(port, "/broker")
        unsupported.value.close()
        assert unsupported.value.code == 404
    finally:
        worker.stop()
        flower.stop()
    assert not worker.problems(), worker.problems()
    assert not flower.problems(), flower.problems()
