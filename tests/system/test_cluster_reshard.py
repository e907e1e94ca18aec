"""Slots moved by `redis-cli --cluster reshard` under load, a partition's among them: its keys migrate (ASK,
TRYAGAIN, then MOVED), producers and workers follow the slot, and every accepted event is sent exactly once."""

import time

import pytest
from redis.crc import key_slot

from tests.cluster_helpers import (
    Producer,
    books,
    cluster,  # noqa: F401  (the module's cluster)
    partitions,
    queues,
    settle,
    start_worker,
    stop_all,
    transport_env,
    use_cluster,
)

MOVE_AT_CALLS = 450  # about 3 s of traffic before the move
AFTER_CALLS = 600  # and about 4 s once the slots are on their new primary


# The workers' fetch connections meet MOVED once the partition's slot is on its new primary, and reconnect.
@pytest.mark.expected_errors("consumer: Cannot connect to", "Connection to broker lost")
@pytest.mark.timeout(300)
def test_a_partition_moved_under_load_loses_nothing_and_sends_nothing_twice(cluster, settings, redis_server):
    queue_settings = queues(cluster.url, redis_server.url, capacity=100_000)
    use_cluster(settings, cluster, redis_server.url, queue_settings)
    workers = [start_worker(queue_settings, redis_server.url, transport_env()) for _ in range(2)]
    producer = Producer(users=600, rate=150)
    slots = {p.tag: key_slot(p.tag.encode()) for p in partitions()}
    source = cluster.owner(slots[partitions()[0].tag])
    target = next(node for node in cluster.primaries() if node is not source)
    # redis-cli moves the source's lowest slots first: enough of them to take partition 0's along.
    count = max(2000, slots[partitions()[0].tag] + 100)
    try:
        producer.start()
        producer.wait_calls(MOVE_AT_CALLS)
        began = time.time()
        cluster.reshard(source, target, count)
        reshard_s = time.time() - began
        moved = sorted(tag for tag, slot in slots.items() if cluster.owner(slot) is target and slot < count)
        producer.wait_calls(AFTER_CALLS)
        records = settle(cluster, producer, redis_server.url)
    finally:
        stop_all(producer, workers)
    result = books(producer, records)
    outcomes = producer.outcomes()
    print(
        f"\nFIGURES cluster-reshard slots_moved={count} {source.port}->{target.port} partitions_moved={moved} "
        f"reshard_s={reshard_s:.2f} events={len(producer.calls)} accepted={result['accepted']} sent={result['sent']} "
        f"lost={len(result['lost'])} doubled={len(result['doubled'])} doubled_ids={len(result['doubled_ids'])} "
        f"outcomes={dict(outcomes)}"
    )
    assert partitions()[0].tag in moved
    assert set(outcomes) == {"accepted"}, outcomes
    assert result["accepted"] > 100
    assert result["lost"] == [], result["lost"][:20]
    assert result["doubled"] == [], result
    assert result["doubled_ids"] == [], result
    assert result["unknown"] == []
