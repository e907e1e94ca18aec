"""`CLUSTER FAILOVER` of a shard's primary under load, critical at durability "replicated": every notify() that
returned an outcome is sent exactly once; one that raised Unavailable may be lost (it was never acknowledged)."""

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

SWITCH_AT_CALLS = 450  # about 3 s of traffic before the switch
AFTER_CALLS = 600  # and about 4 s on the promoted primary


# The workers' fetch connections to the shard's old primary meet MOVED (it is a replica now) and reconnect.
@pytest.mark.expected_errors("consumer: Cannot connect to", "Connection to broker lost", "Couldn't ack")
@pytest.mark.timeout(300)
def test_a_shard_failover_loses_no_acknowledged_event(cluster, settings, redis_server):
    queue_settings = queues(
        cluster.url, redis_server.url, capacity=100_000, durability="replicated", durability_timeout_ms=200
    )
    use_cluster(settings, cluster, redis_server.url, queue_settings)
    env = transport_env()
    workers = [start_worker(queue_settings, redis_server.url, env) for _ in range(2)]
    producer = Producer(users=600, rate=150)
    shard = cluster.owner(key_slot(partitions()[0].tag.encode()))
    on_shard = [p.tag for p in partitions() if cluster.owner(key_slot(p.tag.encode())) is shard]
    try:
        producer.start()
        producer.wait_calls(SWITCH_AT_CALLS)
        switched_at = time.time()
        promoted = cluster.failover(shard)
        switch_s = time.time() - switched_at
        producer.wait_calls(AFTER_CALLS)
        records = settle(cluster, producer, redis_server.url)
    finally:
        stop_all(producer, workers)
    result = books(producer, records)
    outcomes = producer.outcomes()
    unavailable = [entity for entity, outcome, _ in producer.calls if outcome == "unavailable"]
    unavailable_sent = [entity for entity in unavailable if entity in {r["entity_id"] for r in records}]
    slowest = max(
        (ended - began for (_, _, began), (_, _, ended) in zip(producer.calls, producer.calls[1:], strict=False)),
        default=0,
    )
    print(
        f"\nFIGURES cluster-failover shard={shard.port}->{promoted.port} partitions_on_it={len(on_shard)} "
        f"switch_s={switch_s:.2f} events={len(producer.calls)} acknowledged={result['accepted']} "
        f"unavailable={len(unavailable)} unavailable_sent_anyway={len(unavailable_sent)} sent={result['sent']} "
        f"lost={len(result['lost'])} doubled={len(result['doubled'])} doubled_ids={len(result['doubled_ids'])} "
        f"longest_gap_between_calls_s={slowest:.2f} outcomes={dict(outcomes)}"
    )
    assert promoted is not shard
    assert not [o for o in outcomes if o.startswith("error:")], outcomes
    assert set(outcomes) <= {"accepted", "unavailable"}, outcomes
    assert result["accepted"] > 100
    assert result["lost"] == [], result["lost"][:20]
    assert result["doubled"] == [], result
    assert result["doubled_ids"] == [], result
    # Sent without an acknowledgement: only an Unavailable one, whose write reached the replica after all.
    assert set(result["unknown"]) <= set(unavailable)
