"""A class on a real Redis Cluster (3 primaries, 3 replicas): its partitions spread over the shards, each bounded
exactly, admission one round trip on one slot, and a real worker that consumes every partition and sends each
event once."""

import json
from collections import Counter

import pytest
from django.contrib.auth import get_user_model

from notifications import Outcome, Rejected, notify
from pipeline.conf import sluice_settings
from pipeline.connections import get_redis, reset
from pipeline.redis import keys
from sluice_tools.bench.provider import SENT_KEY
from sluice_tools.processes import WorkerProcess
from tests.cluster_helpers import cluster, use_cluster  # noqa: F401  (the module's cluster)
from tests.integration.test_per_class_redis import CHANNELS, KINDS
from tests.waiting import wait_for

CRITICAL = "meeting.reminder"
PARTITIONS = 6
User = get_user_model()  # unsaved users with a pk: notify() takes them as they are


def queues(cluster_url, plain_url, capacity=600):
    return {
        "critical": {"capacity": capacity, "wait_ms": 0, "redis_url": cluster_url, "partitions": PARTITIONS},
        "routine": {"capacity": 100, "redis_url": plain_url, "batch": 1},
        "background": {"capacity": 100, "redis_url": plain_url, "batch": 1},
    }


@pytest.fixture
def on_cluster(settings, cluster, redis_server):
    """Critical on the cluster; routine, background and the recorder's sends on the session's plain Redis."""
    use_cluster(settings, cluster, redis_server.url, queues(cluster.url, redis_server.url))
    yield cluster
    reset()


def start_worker(cluster, plain_url):
    env = {"SLUICE_KINDS": json.dumps(KINDS), "SLUICE_QUEUES": json.dumps(queues(cluster.url, plain_url))}
    return WorkerProcess("critical", plain_url, CHANNELS, env=env)


def partition_depths():
    whole = sluice_settings().queues["critical"]
    client = get_redis(whole.redis_url)
    return [client.llen(part.name) for part in whole.every_partition]


def test_partitions_spread_over_the_shards(on_cluster):
    whole = sluice_settings().queues["critical"]
    owners = Counter(on_cluster.owner(get_redis(whole.redis_url).keyslot(p.tag)).port for p in whole.every_partition)
    assert sorted(owners.values()) == [2, 2, 2], owners
    assert sum(p.capacity for p in whole.every_partition) == whole.capacity


@pytest.mark.expected_errors(r"critical queue .* full")
def test_each_partition_is_bounded_exactly_and_a_worker_sends_every_event_once(on_cluster, redis_server):
    users = [User(pk=i, username=f"u{i}") for i in range(1, 301)]
    outcomes = Counter()
    for round_ in range(4):
        for user in users:
            try:
                outcomes[notify(user, CRITICAL, entity_id=f"m{round_}", payload={"n": round_})] += 1
            except Rejected:
                outcomes["rejected"] += 1
    whole = sluice_settings().queues["critical"]
    shares = [p.capacity for p in whole.every_partition]
    # 1,200 events for 600 places: every partition is full to its share, never above it.
    assert partition_depths() == shares
    assert outcomes[Outcome.ACCEPTED] == whole.capacity
    assert outcomes["rejected"] == 1200 - whole.capacity

    worker = start_worker(on_cluster, redis_server.url).start()
    try:
        sent = get_redis(redis_server.url)
        wait_for(lambda: sent.llen(SENT_KEY) >= whole.capacity and not any(partition_depths()), 60)
        ids = Counter(json.loads(raw)["id"] for raw in sent.lrange(SENT_KEY, 0, -1))
        assert len(ids) == whole.capacity
        assert max(ids.values()) == 1
        cluster_client = get_redis(whole.redis_url)
        # Nothing left unacked or in a processing list in any partition.
        for part in whole.every_partition:
            assert cluster_client.hlen(part.tag + "unacked") == 0
            consumers = cluster_client.smembers(keys.fetch_consumers(part.tag))
            assert consumers, f"no consumer registered in partition {part.tag}"
    finally:
        worker.stop()
    assert not worker.problems(), worker.problems()
