"""kill -9 of critical workers on a real Redis Cluster while events keep arriving: every accepted event is sent, and
none twice (the reaper of each partition puts a dead consumer's fetched and unacked messages back)."""

import pytest

from tests.cluster_helpers import (
    CHANNELS,
    Producer,
    books,
    cluster,  # noqa: F401  (the module's cluster)
    held,
    kill,
    queues,
    settle,
    start_worker,
    stop_all,
    transport_env,
    use_cluster,
)

KILLS = 4
EVERY = 450  # a kill every 450 calls (about 3 s): each lands in a fetch, a send, or an idle wait, wherever it falls
# A send takes 20 ms: at 150 events/s the four slots of the two workers are busy, so a kill finds messages in hand.
SLOW = {name: {**conf, "options": {"latency_ms": 20}} for name, conf in CHANNELS.items()}


# A killed prefork child's parent is killed with it; what the replacement logs about the dead is expected.
@pytest.mark.expected_errors("exited with .signal 9", "WorkerLostError")
@pytest.mark.timeout(300)
def test_kills_on_the_cluster_lose_nothing_and_send_nothing_twice(cluster, settings, redis_server):
    queue_settings = queues(cluster.url, redis_server.url, capacity=100_000)
    use_cluster(settings, cluster, redis_server.url, queue_settings)
    env = transport_env()
    workers = [start_worker(queue_settings, redis_server.url, env, channels=SLOW) for _ in range(2)]
    producer = Producer(users=600, rate=150)
    kills = []  # (when, the killed process group)
    in_hand = []  # (in processing lists, unacked) on the whole cluster just before each kill
    try:
        producer.start()
        for n in range(KILLS):
            producer.wait_calls(EVERY)
            victim = workers[n % 2]
            in_hand.append(held(cluster))
            kills.append((kill(victim), victim.process.pid))
            workers[n % 2] = start_worker(queue_settings, redis_server.url, env, wait=False, channels=SLOW)
        producer.wait_calls(EVERY)  # traffic goes on after the last kill
        # The last kill's holdings come back after the reaper's bound, a mid-send one's after its claim expires.
        records = settle(cluster, producer, redis_server.url)
    finally:
        stop_all(producer, workers)
    result = books(producer, records, kills)
    outcomes = producer.outcomes()
    print(
        f"\nFIGURES cluster-kills kills={len(kills)} events={len(producer.calls)} accepted={result['accepted']} "
        f"sent={result['sent']} lost={len(result['lost'])} doubled={len(result['doubled'])} "
        f"doubled_ids={len(result['doubled_ids'])} doubled_explained={result['doubled_explained_by_a_kill']} "
        f"held_before_kills={in_hand} outcomes={dict(outcomes)}"
    )
    assert set(outcomes) == {"accepted"}, outcomes
    assert len(kills) == KILLS
    assert result["accepted"] > 100
    assert result["lost"] == [], result["lost"][:20]
    # As on one Redis (tests/system/test_reliability_kills.py, docs/reliability.md): a kill that lands after the
    # provider returned and before "sent" is written resends that one message, by the same notification id (the
    # providers' idempotency key); any other copy is a bug.
    assert len(result["doubled"]) == result["doubled_explained_by_a_kill"], result
    assert len(result["doubled_ids"]) <= len(result["doubled"]), result
    assert result["unknown"] == []
    for worker in workers:
        assert not worker.problems(["exited with .signal 9", "WorkerLostError"]), worker.problems()
