"""Scheduled sends under kill -9 and a Redis that lost its data: each is sent once, none lost, none doubled.

Everything runs in processes of its own on one SQLite file and one Redis: the sends are scheduled by a `manage.py
shell` (as a host's web process would), Sluice's beat runs the movers, `manage.py worker` pools send. Every send is
recorded by the file channel (one line each, O_APPEND), so what went out is counted whatever Redis forgets.
"""

import json
import random
import sqlite3
import subprocess
import sys
import time
from collections import Counter

import pytest

from pipeline.redis import keys
from sluice_tools.demo_kinds import DEMO_KINDS
from sluice_tools.processes import ROOT, ManagedProcess, WorkerProcess
from sluice_tools.redis_server import RedisServer
from tests.system.test_reliability_redis import read_sends
from tests.system.test_reliability_worker import kill_tree
from tests.waiting import wait_for

KINDS = {name: {**kind, "channels": ["push"]} for name, kind in DEMO_KINDS.items()}
CRITICAL, ROUTINE = "meeting.reminder", "task.comment"
RUNS = 5
# Each run's kill lands this far from the first send's due time: before it, at it, in the middle of the sends (due
# over 3 s).
KILL_OFFSETS_S = (-0.4, 0.0, 0.5, 1.2, 2.0)
# Scheduling comes from a process of its own (a few seconds to start on a busy machine): the sends are due this long
# after it began, so that the kill still comes before or among them.
LEAD_S = 15
# What a killed prefork pool's successors and a killed beat's leave in the logs.
KILLED = ("exited with .signal 9", "WorkerLostError")
SCHEDULE = """
import json, os, time
from django.contrib.auth import get_user_model
from notifications import notify
spec = json.loads(os.environ["SCHEDULE_SPEC"])
users = [get_user_model().objects.get_or_create(username=f"s{n}")[0] for n in range(10)]
start = time.time() + spec["lead_s"]
for seq, kind, offset in spec["sends"]:
    notify(users[seq % 10], kind, entity_id=f"e{seq}", payload={"seq": seq}, send_at=start + offset)
print("START", start)
"""


class Stack:
    """A database file, the environment every process shares, and the processes: beat and two pools."""

    def __init__(self, tmp_path, redis_url, schedule=None):
        self.database = tmp_path / "sluice.db"
        self.sends = tmp_path / "sends.jsonl"
        recorder = {"backend": "tests.system.test_reliability_redis.FileRecorder", "options": {"path": str(self.sends)}}
        self.env = {
            "REDIS_URL": redis_url,
            "DATABASE_URL": f"sqlite:///{self.database}",
            "SLUICE_KINDS": json.dumps(KINDS),
            "SLUICE_CHANNELS": json.dumps({name: recorder for name in ("email", "sms", "push")}),
            "SLUICE_SCHEDULE": json.dumps(schedule or {}),
            # A killed worker's messages come back within seconds (the reaper), not five minutes.
            "SLUICE_VISIBILITY_TIMEOUT_S": "2",
            "SLUICE_FETCH_DEAD_AFTER_S": "3",
        }
        self.redis_url = redis_url
        subprocess.run(
            [sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=self.merged(), check=True, timeout=300
        )
        self.processes = {}

    def merged(self):
        import os

        return {**os.environ, **self.env}

    def schedule(self, sends, lead_s):
        """Schedule ``sends`` [(seq, kind, seconds after the start)] in a process of its own; return the start."""
        env = {**self.merged(), "SCHEDULE_SPEC": json.dumps({"sends": sends, "lead_s": lead_s})}
        done = subprocess.run(
            [sys.executable, "manage.py", "shell", "-c", SCHEDULE],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        [line] = [line for line in done.stdout.splitlines() if line.startswith("START ")]
        return float(line.split()[1])

    def start(self, *names):
        for name in names:
            if name == "beat":
                process = ManagedProcess(
                    "beat",
                    [sys.executable, "-m", "celery", "-A", "pipeline", "beat", "--loglevel", "INFO"],
                    env=self.env,
                    ready_text="beat: Starting",
                )
            else:
                process = WorkerProcess(name, self.redis_url, extra=["--concurrency", "2"], env=self.env)
            self.processes[name] = process.start()

    def kill(self, *names):
        for name in names:
            kill_tree(self.processes[name].process)

    def stop(self):
        for process in self.processes.values():
            process.stop()

    def pending_rows(self):
        with sqlite3.connect(self.database, timeout=20) as db:
            [(count,)] = db.execute("SELECT count(*) FROM sluice_notifications_scheduledsend").fetchall()
        return count

    def books(self, seqs):
        """Lost and doubled among ``seqs``, by what the file channel recorded."""
        sent = Counter(send["seq"] for send in read_sends(self.sends) if send["seq"] in seqs)
        return {"lost": sorted(set(seqs) - set(sent)), "doubled": sorted(s for s, n in sent.items() if n > 1)}


def sends_for(run, count=30, over_s=3.0):
    """``count`` sends of one run, critical and routine alternately, due over ``over_s``: (seq, kind, offset)."""
    return [(run * 1000 + n, CRITICAL if n % 2 else ROUTINE, round(n * over_s / count, 3)) for n in range(count)]


@pytest.mark.expected_errors(*KILLED)
@pytest.mark.timeout(900)
def test_the_mover_and_the_workers_killed_around_the_due_time_lose_and_double_nothing(redis_server, tmp_path):
    stack = Stack(tmp_path, redis_server.url)
    rng = random.Random(37)
    results = []
    try:
        stack.start("critical", "routine", "beat")
        for run, offset in enumerate(KILL_OFFSETS_S[:RUNS]):
            sends = sends_for(run)
            start = stack.schedule(sends, lead_s=LEAD_S)
            kill_at = start + offset + rng.uniform(0, 0.2)
            time.sleep(max(0.0, kill_at - time.time()))  # the kill comes at its moment of the run: a timeline
            killed_at = time.time()
            stack.kill("beat", "critical", "routine")
            seqs = {seq for seq, *_ in sends}
            before = len(seqs) - len(stack.books(seqs)["lost"])
            stack.start("critical", "routine", "beat")
            # A mover killed mid-step holds its claims and rows for their lease (30 s): its successor takes them over.
            wait_for(
                lambda s=seqs: not stack.books(s)["lost"] and not stack.pending_rows(),
                120,
                what=lambda s=seqs: f"every send of the run out: {stack.books(s)}, {stack.pending_rows()} rows left",
            )
            time.sleep(1)  # a resend would come within the visibility timeout: give it its chance to show
            books = stack.books(seqs)
            results.append({"killed_after_due_s": round(killed_at - start, 2), "sent_before_the_kill": before, **books})
    finally:
        stack.stop()
    print(f"\n{RUNS} runs of {len(sends_for(0))} scheduled sends, beat and both pools killed -9: {results}")
    # Each kill came around the due time, before or among the sends (not after they had all gone out).
    assert all(r["sent_before_the_kill"] < len(sends_for(0)) for r in results), results
    assert [r["lost"] for r in results] == [[]] * RUNS
    assert [r["doubled"] for r in results] == [[]] * RUNS


@pytest.fixture
def own_redis(redis_server):
    """A redis-server of this test's own, without persistence, that it may kill and restart empty."""
    server = RedisServer().start()
    try:
        yield server
    finally:
        server.stop()


# While Redis is down the workers, beat and the movers say so, and reconnect.
@pytest.mark.expected_errors(
    "consumer: Cannot connect to redis",
    "Connection to broker lost",
    "Couldn't ack",
    "Couldn't apply scheduled task",
    "beat: Connection error",
)
@pytest.mark.timeout(400)
def test_a_redis_restarted_without_its_data_loses_no_scheduled_send(own_redis, tmp_path):
    # Staged in Redis: what is due within a minute (scheduling stages what is due within 1.5 of it at once).
    stack = Stack(tmp_path, own_redis.url, schedule={"staged_s": 60})
    near = [(n, CRITICAL if n % 2 else ROUTINE, 15 + n * 0.1) for n in range(20)]
    far = [(100 + n, CRITICAL if n % 2 else ROUTINE, 100 + n * 0.1) for n in range(20)]
    try:
        stack.start("critical", "routine", "beat")
        start = stack.schedule(near + far, lead_s=0)
        staged = own_redis.admin().zcard(keys.scheduled_due("critical")) + own_redis.admin().zcard(
            keys.scheduled_due("routine")
        )
        own_redis.halt(kill=True)
        time.sleep(2)  # the outage: the movers wait, retrying every second
        own_redis.start()  # empty: it persists nothing (no RDB, no AOF)
        seqs = {seq for seq, *_ in near + far}
        wait_for(
            lambda: not stack.books(seqs)["lost"] and not stack.pending_rows(),
            start + 100 + 60 - time.time(),
            what=lambda: f"every send out: {stack.books(seqs)}, {stack.pending_rows()} rows left",
        )
        time.sleep(1)
        books = stack.books(seqs)
        sent = {s["seq"]: s["t"] for s in read_sends(stack.sends)}
    finally:
        stack.stop()
    print(f"\n{staged} sends staged when Redis was killed; {len(near)} due before and {len(far)} after: {books}")
    assert staged >= len(near)  # the near ones were in Redis, and Redis lost them
    assert books == {"lost": [], "doubled": []}
    # Each went out at its time, not before: the far ones a minute and a half after the restart.
    assert all(sent[seq] >= start + offset - 0.05 for seq, _kind, offset in near + far)
