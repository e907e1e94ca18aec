"""Routine on a real Redis Cluster, its folds on the digest's own Redis: a flood folds per partition, the flush sends
one digest per user into their partitions, a worker sends each once; the exporter, KEDA's API and capacity read every
partition."""

import json
from collections import Counter
from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from prometheus_client.core import CollectorRegistry
from prometheus_client.exposition import generate_latest

from digest.flush import run_flush
from notifications import Outcome, notify
from pipeline.conf import sluice_settings
from pipeline.connections import get_redis, reset
from pipeline.observe.exporter import SluiceCollector
from pipeline.observe.scaler import scaler_payload
from pipeline.observe.window import sample
from sluice_tools.bench.provider import SENT_KEY
from sluice_tools.processes import WorkerProcess
from tests.cluster_helpers import cluster  # noqa: F401  (the module's cluster)
from tests.integration.test_per_class_redis import CHANNELS, KINDS
from tests.unit.test_exporter import metrics
from tests.waiting import wait_for

ROUTINE = "task.assigned"
PARTITIONS = 3
CAPACITY = 30
User = get_user_model()

pytestmark = pytest.mark.django_db  # the flush rebuilds the preferences' mirror from the database


def configured(cluster_url, plain_url):
    queues = {
        "critical": {"capacity": 100, "redis_url": plain_url},
        "routine": {"capacity": CAPACITY, "redis_url": cluster_url, "partitions": PARTITIONS, "batch": 10},
        "background": {"capacity": 100, "redis_url": plain_url, "batch": 1},
    }
    return {"SLUICE_QUEUES": queues, "SLUICE_DIGEST": {"redis_url": plain_url, "max_keys": 500}, "SLUICE_KINDS": KINDS}


@pytest.fixture
def routine_on_cluster(settings, cluster, redis_server):
    for node in cluster.primaries():
        node.admin().flushall()
    get_redis(redis_server.url).flushdb()
    settings.SLUICE_CHANNELS = CHANNELS
    for name, value in configured(cluster.url, redis_server.url).items():
        setattr(settings, name, value)
    reset()
    yield cluster
    reset()


def scrape():
    registry = CollectorRegistry()
    registry.register(SluiceCollector(60))
    return metrics(generate_latest(registry).decode())


@pytest.mark.timeout(120)
def test_a_routine_flood_folds_per_partition_and_each_digest_goes_out_once(routine_on_cluster, redis_server):
    users = [User(pk=i, username=f"u{i}") for i in range(1, 61)]
    outcomes = Counter()
    for round_ in range(5):
        for user in users:
            outcomes[notify(user, ROUTINE, entity_id=f"t{round_}", payload={"n": round_})] += 1
    whole = sluice_settings().queues["routine"]
    assert outcomes[Outcome.ACCEPTED] == CAPACITY  # every partition full to its share, then folds
    assert outcomes[Outcome.FOLDED] == 300 - CAPACITY

    sample(60)
    found = scrape()
    assert found["sluice_queue_depth", (("queue", "routine"),)] == CAPACITY
    parts = [found["sluice_partition_depth", (("partition", str(i)), ("queue", "routine"))] for i in range(PARTITIONS)]
    assert parts == [p.capacity for p in whole.every_partition]
    # KEDA's metrics-api reads the class across its partitions too.
    assert scaler_payload("routine", 60)["depth"] == CAPACITY
    out = StringIO()
    workers = ["--workers", "critical=1", "--workers", "routine=1", "--workers", "background=1"]
    call_command("capacity", "--json", *workers, stdout=out)
    assert {r["queue"]: r["depth"] for r in json.loads(out.getvalue())}["routine"] == CAPACITY

    env = {name: json.dumps(value) for name, value in configured(routine_on_cluster.url, redis_server.url).items()}
    worker = WorkerProcess("routine", redis_server.url, CHANNELS, env=env).start()
    try:
        sent = get_redis(redis_server.url)
        cluster_client = get_redis(whole.redis_url)

        def drained():
            run_flush("test")
            return not any(cluster_client.llen(part.name) for part in whole.every_partition) and sent.llen(
                SENT_KEY
            ) >= CAPACITY + len(users)

        wait_for(drained, 90, what="the folds flushed and every partition drained")
        records = [json.loads(raw) for raw in sent.lrange(SENT_KEY, 0, -1)]
    finally:
        worker.stop()
    ids = Counter(record["id"] for record in records)
    assert max(ids.values()) == 1
    digests = [r for r in records if r["id"].startswith("digest-")]
    # One digest per user, and the folded events counted in them once.
    assert len({r["id"] for r in digests}) == len(digests)
    assert sum(r["count"] for r in digests) == outcomes[Outcome.FOLDED]
    assert len(records) - len(digests) == CAPACITY
    assert not worker.problems(), worker.problems()
