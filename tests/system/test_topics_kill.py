"""A topic of 4,000 subscribers fanned out by a real worker killed with SIGKILL twice during the fan-out: every
subscriber gets the event exactly once (one notification each, admitted once however often its chunk ran), and the
job counts each once."""

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter

import pytest

from notifications.topics import tasks
from pipeline.redis import keys
from sluice_tools.bench.provider import sent_records
from sluice_tools.processes import ROOT, ManagedProcess
from tests.waiting import settled, wait_for

SUBSCRIBERS = 4000

FILL = f"""
import django
django.setup()
from django.contrib.auth import get_user_model
from notifications import notify_topic, subscribe
User = get_user_model()
User.objects.bulk_create([User(username=f"s{{i}}", email=f"s{{i}}@example.com") for i in range({SUBSCRIBERS})])
print(subscribe("board:b1", User.objects.all()))
job = notify_topic("board:b1", "board.updated", entity_id="b1", payload={{"title": "Moved"}})
print(job.token)
"""


def worker(env):
    """A background worker whose fan-out chunks each take 0.2 s longer, so the kills land mid-fan-out."""
    command = [
        "manage.py",
        "worker",
        "background",
        "-c",
        "1",
        "--loglevel=INFO",
        "--without-mingle",
        "--without-gossip",
    ]
    code = (
        "import sys, runpy; import tests.hooks as hooks; hooks.slow_topic_chunks(0.2); "
        f"sys.argv = {command}; runpy.run_path('manage.py', run_name='__main__')"
    )
    return ManagedProcess("worker-topics", [sys.executable, "-c", code], env=env, ready_text=" ready.").start()


@pytest.mark.timeout(600)
@pytest.mark.expected_errors("exited with .signal 9")
def test_a_fan_out_killed_twice_reaches_every_subscriber_once(redis_server, redis_client, tmp_path):
    provider = {"backend": "sluice_tools.bench.provider.SimulatedProvider", "options": {"latency_ms": 0}}
    database = tmp_path / "topics.db"
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "REDIS_URL": redis_server.url,
        "DATABASE_URL": f"sqlite:///{database}",
        "SLUICE_CHANNELS": json.dumps({name: provider for name in ("email", "sms", "push")}),
        # Room for every subscriber's event: this test is about the fan-out, not the bound.
        "SLUICE_QUEUES": json.dumps(
            {k: {"capacity": 100_000, "wait_ms": 0} for k in ("critical", "routine", "background")}
        ),
        "SLUICE_FETCH_DEAD_AFTER_S": "3",
        "SLUICE_VISIBILITY_TIMEOUT_S": "10",
    }
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True, timeout=120)
    filled = subprocess.run(
        [sys.executable, "-c", FILL], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert filled.returncode == 0, filled.stderr
    added, token = filled.stdout.split()[-2:]
    assert int(added) == SUBSCRIBERS

    def left():
        value = redis_client.hget(keys.topic_backlog("background"), token)
        return None if value is None else int(value)

    asked = [0.0]

    def tick():
        # Beat's tick, played by the test once a second (the job row is in the workers' database): a step is asked
        # for unless one waits in the queue; after a kill, once the dead step's lease is gone, a step takes over.
        if time.monotonic() - asked[0] >= 1:
            asked[0] = time.monotonic()
            tasks.ask("background")
        return True

    for kill_below in (SUBSCRIBERS * 3 // 4, SUBSCRIBERS * 3 // 8):
        running = worker(env)
        try:
            wait_for(lambda b=kill_below: tick() and (left() or 0) <= b, timeout=240, what="mid-fan-out")
            assert left() > 0, "the fan-out finished before the kill"
            running.process.send_signal(signal.SIGKILL)
            running.process.wait()
        finally:
            running.stop()
    last = worker(env)
    try:
        wait_for(lambda: tick() and left() is None, timeout=240, what="the fan-out done")
        wait_for(lambda: settled("background"), timeout=120, what="every send acked")
    finally:
        last.stop()

    job = (
        sqlite3.connect(database)
        .execute("SELECT state, subscribers, done, rejected, counts FROM sluice_notifications_topicfanout")
        .fetchone()
    )
    assert job[:4] == ("done", SUBSCRIBERS, SUBSCRIBERS, 0)
    assert json.loads(job[4]) == {"accepted": SUBSCRIBERS}  # each counted once, a replayed chunk as its first run
    records = sent_records(redis_client)
    # One notification per subscriber: admitted once, however often its chunk ran.
    notifications_of = {}
    for record in records:
        notifications_of.setdefault(record["user"], set()).add(record["id"])
    assert len(notifications_of) == SUBSCRIBERS
    assert Counter(len(ids) for ids in notifications_of.values()) == {1: SUBSCRIBERS}
    # Sent once each: a resend can only be the send under way when a kill came (the provider had returned).
    assert len(records) - SUBSCRIBERS <= 2
