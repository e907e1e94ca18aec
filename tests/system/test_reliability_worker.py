"""Process faults around the workers: kill -9 mid-send, SIGTERM and SIGQUIT, a killed beat, a dead exporter.

Each test runs real `manage.py worker` subprocesses against the session's Redis, with the simulated provider
recording every send (with its notification id) in Redis, so "sent exactly once" is counted, not assumed.
"""

import json
import signal
import sqlite3
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections import Counter

import psutil
import pytest
from django.contrib.auth import get_user_model

from notifications import Outcome, notify
from pipeline.metrics import read_counters
from pipeline.redis import keys
from sluice_tools.bench.provider import sent_records
from sluice_tools.demo_kinds import DEMO_KINDS
from sluice_tools.processes import ROOT, ManagedProcess, WorkerProcess
from sluice_tools.redis_server import free_port
from tests.waiting import wait_for

RECORDER = "sluice_tools.bench.provider.SimulatedProvider"
# One channel per kind: one send is one record, so a record count is a send count.
KINDS = {name: {**kind, "channels": ["push"]} for name, kind in DEMO_KINDS.items()}
# Short, so that each kill's redelivery comes within seconds; the send claim follows it (claims.claim_ttl).
VISIBILITY_S = 2
# Two kills of each pool show the property; `manage.py bench kills` runs the long loop (200 kills, docs/reliability.md).
KILL_TRIALS = 4
UNACKED, UNACKED_INDEX = "unacked", "unacked_index"  # kombu's Redis transport: delivered, not yet acked


def channels(latency_ms):
    return {name: {"backend": RECORDER, "options": {"latency_ms": latency_ms}} for name in ("email", "sms", "push")}


def worker(klass, redis_url, latency_ms, visibility_s=VISIBILITY_S, concurrency=1, env=None):
    environment = {"SLUICE_KINDS": json.dumps(KINDS), "SLUICE_VISIBILITY_TIMEOUT_S": str(visibility_s), **(env or {})}
    return WorkerProcess(
        klass, redis_url, channels(latency_ms), extra=["--concurrency", str(concurrency)], env=environment
    )


def kill_tree(process):
    """SIGKILL a worker and every child it has, parent first, as an OOM kill or a lost node would."""
    parent = psutil.Process(process.pid)
    family = [parent, *parent.children(recursive=True)]
    for member in family:
        try:
            member.send_signal(signal.SIGKILL)
        except psutil.NoSuchProcess:
            pass
    process.wait(10)
    psutil.wait_procs(family[1:], timeout=10)


def records_of(client, notification_id):
    return [r for r in sent_records(client) if r["id"] == notification_id]


def new_claim(client, seen, timeout=20):
    """The notification id of a send that has just claimed its channel (state "sending")."""
    found = []

    def claimed():
        for key in client.scan_iter(f"{keys.PREFIX}:sent:*"):
            if key not in seen and client.get(key) == b"sending":
                seen.add(key)
                found.append(key.decode().split(":")[2])
                return True
        return False

    wait_for(claimed, timeout, what="a send started")
    return found[0]


def settled(client, queue):
    """Nothing waits in the queue and nothing is delivered but unacknowledged."""
    return not client.llen(queue) and not client.hlen(UNACKED)


def state(client, queue, *logs):
    """What a failed wait saw: the queue, unacked, every send claim, and the workers' last log lines."""
    claims = {k.decode(): client.get(k) for k in client.scan_iter(f"{keys.PREFIX}:sent:*")}
    return {"queued": client.llen(queue), "unacked": client.hlen(UNACKED), "claims": claims, "logs": logs}


@pytest.fixture
def one_channel(settings):
    settings.SLUICE_KINDS = KINDS


@pytest.mark.timeout(360)
def test_worker_killed_mid_send_each_message_is_sent_once(redis_client, redis_server, one_channel):
    """kill -9 of the whole worker (every process) while the provider is sending: the message stays in
    kombu's unacked hash, is restored once the visibility timeout has passed, and is sent exactly once."""
    latency_ms = 1000
    user = get_user_model()(pk=1)
    pools = {"critical": "meeting.reminder", "routine": "task.assigned"}
    running = {klass: worker(klass, redis_server.url, latency_ms).start() for klass in pools}
    seen, mid_send, late, trials = set(), [], [], Counter()
    attempt = 0
    try:
        while len(mid_send) < KILL_TRIALS and attempt < KILL_TRIALS + 10:
            attempt += 1
            klass = ("critical", "routine")[len(mid_send) % 2]
            assert notify(user, pools[klass], entity_id=f"kill-{attempt}") == Outcome.ACCEPTED
            notification_id = new_claim(redis_client, seen)
            time.sleep(0.2)  # well inside the provider's 1 s send
            kill_tree(running[klass].process)
            running[klass].stop()
            # Nothing recorded: the kill landed mid-send. A machine stalled past the whole send makes it land
            # after; such an attempt is not a trial (and may resend: the window after the backend returns).
            landed_mid_send = not records_of(redis_client, notification_id)
            (mid_send if landed_mid_send else late).append(notification_id)
            # A consumer restores unacked messages older than the visibility timeout when it starts (and
            # every unacked_restore_interval x unacked_restore_throttle seconds after), so start the
            # replacement once the timeout has passed.
            delivered = redis_client.zrange(UNACKED_INDEX, 0, -1, withscores=True)
            if delivered:
                time.sleep(max(0.0, max(score for _, score in delivered) + VISIBILITY_S + 0.3 - time.time()))
            running[klass] = worker(klass, redis_server.url, latency_ms).start()
            wait_for(lambda n=notification_id: records_of(redis_client, n), 30, what=f"attempt {attempt} sent")
            wait_for(lambda q=klass: settled(redis_client, q), 15)
            trials[klass] += landed_mid_send
        time.sleep(VISIBILITY_S + 0.5)  # a second copy, had there been one, would have been sent by now
    finally:
        for process in running.values():
            process.stop()
    sends = Counter(r["id"] for r in sent_records(redis_client))
    print(f"\n{len(mid_send)} kills mid-send, {len(late)} after the send; {sends.total()} sends, {len(sends)} ids")
    assert trials == {"critical": KILL_TRIALS // 2, "routine": KILL_TRIALS // 2}
    assert {i: sends[i] for i in mid_send} == dict.fromkeys(mid_send, 1)  # each exactly once
    assert all(1 <= sends[i] <= 2 for i in late)
    assert set(sends) == set(mid_send) | set(late)  # nothing else was sent


@pytest.mark.expected_errors("exited with .signal 9 .SIGKILL.", "WorkerLostError")
@pytest.mark.timeout(120)
def test_critical_child_killed_mid_send_is_requeued_and_sent_once(redis_client, redis_server, one_channel):
    """kill -9 of one prefork child: the parent sees the child lost and requeues at once
    (reject_on_worker_lost); the claim the dead child left makes the retry wait claim_ttl(), then send."""
    user = get_user_model()(pk=1)
    pool = worker("critical", redis_server.url, 1000).start()
    seen, mid_send, late = set(), [], []
    attempt = 0
    try:
        while len(mid_send) < 5 and attempt < 10:
            attempt += 1
            notify(user, "meeting.cancelled", entity_id=f"child-{attempt}")
            notification_id = new_claim(redis_client, seen)
            time.sleep(0.2)  # the kill lands inside the provider's 1 s send: the test is about that instant
            (child,) = psutil.Process(pool.process.pid).children()  # concurrency 1: the one sending
            child.send_signal(signal.SIGKILL)
            psutil.wait_procs([child], timeout=10)
            # As in the whole-worker test: a kill that a stalled machine lands after the send is no trial.
            (late if records_of(redis_client, notification_id) else mid_send).append(notification_id)
            wait_for(lambda n=notification_id: records_of(redis_client, n), 30, what=f"attempt {attempt} sent")
            wait_for(lambda: settled(redis_client, "critical"), 15)
        time.sleep(VISIBILITY_S + 0.5)  # a second copy, had there been one, would have been sent by now
        assert pool.process.poll() is None  # the parent survived and replaced its children
    finally:
        pool.stop()
    sends = Counter(r["id"] for r in sent_records(redis_client))
    assert {i: sends[i] for i in mid_send} == dict.fromkeys(mid_send, 1)
    assert len(mid_send) == 5
    assert all(1 <= sends[i] <= 2 for i in late)
    assert set(sends) == set(mid_send) | set(late)


@pytest.mark.timeout(120)
def test_sigterm_finishes_started_sends_and_leaves_the_rest_queued(redis_client, redis_server, one_channel):
    """Warm shutdown: the two sends in progress finish and are acked; the two not started stay in the queue."""
    user = get_user_model()(pk=1)
    pool = worker("routine", redis_server.url, 1500, visibility_s=300, concurrency=2).start()
    seen = set()
    try:
        for i in range(4):
            notify(user, "task.comment", entity_id=f"term-{i}")
        started = {new_claim(redis_client, seen), new_claim(redis_client, seen)}
        pool.process.send_signal(signal.SIGTERM)
        pool.process.wait(30)
    finally:
        pool.stop()
    sent = {r["id"] for r in sent_records(redis_client)}
    assert started <= sent
    # Each message was sent or is still queued, never both or neither. (On a stalled machine a thread may
    # finish and start a third send before the signal; it then finishes too.)
    assert len(sent) + redis_client.llen("routine") == 4
    assert redis_client.hlen(UNACKED) == 0  # finished work is acked, not left for a redelivery
    successor = worker("routine", redis_server.url, 0, visibility_s=300).start()
    try:
        wait_for(lambda: len(sent_records(redis_client)) >= 4, 20)
        wait_for(lambda: settled(redis_client, "routine"), 10)
    finally:
        successor.stop()
    ids = Counter(r["id"] for r in sent_records(redis_client))
    assert len(ids) == 4
    assert set(ids.values()) == {1}


# Celery's thread pool cannot stop a running thread: a cold shutdown says so as an unrecoverable error.
@pytest.mark.expected_errors("does not implement kill_job")
@pytest.mark.timeout(180)
@pytest.mark.parametrize(("klass", "kind"), [("critical", "meeting.reminder"), ("routine", "task.comment")])
def test_cold_shutdown_after_the_soft_timeout(redis_client, redis_server, one_channel, klass, kind):
    """SIGQUIT (or a warm shutdown pushed into a cold one): the soft shutdown gives running sends
    SLUICE_SOFT_SHUTDOWN_S. Then prefork (critical) terminates its children and requeues their messages at
    once; Celery's thread pool cannot cancel a running thread (no kill_job), so routine's sends finish and
    are acked. Either way the next worker sends each message exactly once."""
    user = get_user_model()(pk=1)
    soft = {"SLUICE_SOFT_SHUTDOWN_S": "1"}
    pool = worker(klass, redis_server.url, 4000, visibility_s=3, concurrency=2, env=soft).start()
    seen = set()
    try:
        for i in range(4):
            notify(user, kind, entity_id=f"quit-{i}")
        interrupted = {new_claim(redis_client, seen), new_claim(redis_client, seen)}
        pool.process.send_signal(signal.SIGQUIT)
        pool.process.wait(30)
        shutdown_log = pool.output()[-3000:]
    finally:
        pool.stop()
    assert redis_client.hlen(UNACKED) == 0  # nothing is left for a visibility-timeout redelivery
    if klass == "critical":
        # The children were terminated before their 4 s sends finished: nothing went out, all four are back.
        assert sent_records(redis_client) == []
        assert redis_client.llen(klass) == 4  # requeued at once, not after the visibility timeout
    else:
        sent = {r["id"] for r in sent_records(redis_client)}
        assert interrupted <= sent
        # A loaded machine may let a thread take one more message before the consumer stops: then that
        # one is sent too. Either way each message is sent or back in the queue, never both or neither.
        assert len(sent) + redis_client.llen(klass) == 4
    successor = worker(klass, redis_server.url, 0, visibility_s=3, concurrency=2).start()
    try:
        # Interrupted sends left claims: their redeliveries retry after claim_ttl() (3 s here), then send.
        # Generous: on a loaded machine the claim expiry, the retry and the 4 s sends stretch out.
        wait_for(
            lambda: len(sent_records(redis_client)) >= 4,
            90,
            what=lambda: f"all four sent: {state(redis_client, klass, shutdown_log, successor.output()[-3000:])}",
        )
        wait_for(lambda: settled(redis_client, klass), 10)
    finally:
        successor.stop()
    ids = Counter(r["id"] for r in sent_records(redis_client))
    assert len(ids) == 4
    assert set(ids.values()) == {1}
    assert interrupted <= set(ids)


def beat(redis_url, database_url):
    return ManagedProcess(
        "beat",
        [sys.executable, "-m", "celery", "-A", "pipeline", "beat", "--loglevel", "INFO"],
        env={"REDIS_URL": redis_url, "DATABASE_URL": database_url},
        ready_text="beat: Starting",
    )


def flushes(client):
    return read_counters(client).get("digest:flushes", 0)


def accounted(client, total):
    """Single sends plus the events inside digests equal ``total``."""
    records = sent_records(client)
    return sum(r["count"] for r in records) == total


@pytest.mark.timeout(180)
def test_killed_beat_resumes_flushing_when_restarted(redis_client, redis_server, settings, tmp_path, monkeypatch):
    queues = {"routine": {"capacity": 3}}
    settings.SLUICE_QUEUES = queues
    settings.SLUICE_KINDS = KINDS
    database = tmp_path / "beat.db"
    database_url = f"sqlite:///{database}"
    monkeypatch.setenv("DATABASE_URL", database_url)
    monkeypatch.setenv("SLUICE_QUEUES", json.dumps(queues))
    # The flush every 2 s instead of 60, by the setting (Sluice's beat puts the setting's interval into the schedule).
    monkeypatch.setenv("SLUICE_DIGEST", json.dumps({"flush_interval_s": 2, "max_keys": 200}))
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, check=True, timeout=120)
    with sqlite3.connect(database) as db:
        [(every,)] = db.execute(
            "SELECT every FROM django_celery_beat_intervalschedule WHERE id = "
            "(SELECT interval_id FROM django_celery_beat_periodictask WHERE task = 'sluice.digest.flush')"
        ).fetchall()
    assert every == 2
    env = {"DATABASE_URL": database_url, "SLUICE_QUEUES": json.dumps(queues)}
    pools = [worker(k, redis_server.url, 20, visibility_s=300, env=env) for k in ("critical", "routine")]
    user = get_user_model()(pk=1)
    scheduler = beat(redis_server.url, database_url)
    try:
        for pool in pools:
            pool.start()
        scheduler.start()
        outcomes = Counter(str(notify(user, "task.comment", entity_id=f"t{i % 3}")) for i in range(30))
        assert outcomes["folded"] > 0
        wait_for(lambda: accounted(redis_client, 30), 30, what="beat's flushes delivered the digests")
        kill_tree(scheduler.process)
        scheduler.stop()
        time.sleep(1)  # a flush beat published just before dying runs out
        before = flushes(redis_client)
        outcomes = Counter(str(notify(user, "task.comment", entity_id=f"t{i % 3}")) for i in range(30))
        assert outcomes["folded"] > 0
        time.sleep(6)  # three flush intervals with no beat
        assert flushes(redis_client) == before
        assert redis_client.zcard(keys.pending()) > 0
        scheduler = beat(redis_server.url, database_url).start()
        wait_for(lambda: accounted(redis_client, 60), 30, what="the restarted beat flushed")
        assert flushes(redis_client) > before
    finally:
        scheduler.stop()
        for pool in pools:
            pool.stop()
    assert redis_client.zcard(keys.pending()) == 0
    assert len({r["id"] for r in sent_records(redis_client)}) == len(sent_records(redis_client))


# A short window, sampled often, so the drain rate it publishes (TTL 2 x window) expires within the test.
EXPORTER_WINDOW = ("--window=4", "--sample-every=0.5")


def scrape(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        return response.read().decode()


def exporter(redis_url, port):
    return ManagedProcess(
        "exporter",
        [sys.executable, "manage.py", "pipeline_exporter", "--host=127.0.0.1", f"--port={port}", *EXPORTER_WINDOW],
        env={"REDIS_URL": redis_url},
        ready_text="exporter on",
    )


@pytest.mark.timeout(120)
def test_exporter_down_changes_nothing_and_misses_nothing(redis_client, redis_server, one_channel):
    """The exporter only reads Redis: with it dead, admission and sends go on, and when it comes back its
    counters include everything that happened meanwhile (they live in Redis, not in the exporter)."""
    port = free_port()
    user = get_user_model()(pk=1)
    pools = [worker(k, redis_server.url, 0, visibility_s=300).start() for k in ("critical", "routine")]
    metrics = exporter(redis_server.url, port).start()
    try:
        assert "sluice_queue_depth" in scrape(port)
        for i in range(10):
            notify(user, "meeting.reminder", entity_id=f"before-{i}")
            time.sleep(0.1)
        wait_for(lambda: redis_client.exists(keys.drain_rate("critical")), 10)
        kill_tree(metrics.process)
        metrics.stop()
        with pytest.raises(urllib.error.URLError):
            scrape(port)
        outcomes = Counter(str(notify(user, "meeting.reminder", entity_id=f"m{i}")) for i in range(20))
        outcomes += Counter(str(notify(user, "task.assigned", entity_id=f"t{i}")) for i in range(50))
        assert outcomes == {"accepted": 70}
        wait_for(lambda: len(sent_records(redis_client)) == 80, 30)
        # The drain rate it measured expires (2 x window), so a rejection's retry_after falls back to 1 s
        # instead of trusting a stale figure.
        wait_for(lambda: not redis_client.exists(keys.drain_rate("critical")), 15)
        metrics = exporter(redis_server.url, port).start()
        text = scrape(port)
    finally:
        metrics.stop()
        for pool in pools:
            pool.stop()
    assert 'sluice_notifications_total{class="critical",outcome="accepted"} 30.0' in text
    assert 'sluice_notifications_total{class="routine",outcome="accepted"} 50.0' in text
    assert 'sluice_sent_total{channel="push",class="critical",status="sent"} 30.0' in text
    assert 'sluice_sent_total{channel="push",class="routine",status="sent"} 50.0' in text
    assert len({r["id"] for r in sent_records(redis_client)}) == 80
