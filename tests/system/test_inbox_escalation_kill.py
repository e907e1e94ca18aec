"""Escalation with a drainer killed (SIGKILL) mid-drain: 100 items, 60 read before after_s, 40 not, drained ten at a
time; the killed drainer's claims (a batch it admitted and never recorded) are taken over once its lease ran out, and a
real worker sends exactly 40 emails, each once."""

import json
import os
import signal
import subprocess
import sys

import pytest
from celery.contrib.testing.worker import start_worker

from pipeline.celery import app
from pipeline.connections import get_redis
from pipeline.redis import keys
from sluice_tools.processes import ROOT
from tests.inbox_helpers import INBOX, INBOX_KINDS, LOCMEM, inbox_settings  # noqa: F401 - the fixture
from tests.waiting import settled, wait_for

DRAINER = """
import json, os, signal, sys, time, uuid
import django
django.setup()
from django.contrib.auth import get_user_model
from django.utils import timezone
from notifications.channels.base import Message
from notifications.inbox import escalation, unread
from notifications.inbox.channel import InboxChannel
from notifications.inbox.models import InboxItem

mode = sys.argv[1]
if mode == "fill":
    user = get_user_model().objects.create_user("ada", email="ada@example.com")
    channel = InboxChannel("inbox")
    for i in range(100):
        channel.send(Message(uuid.uuid4().hex, "inbox", "doc.changed", "routine", user.pk, f"d{i}", "", "",
                             payload={"title": f"Doc {i}"}))
    read = [f"d{i}" for i in range(100) if i % 5 < 3]  # 60 read, spread, so the killed drainer sent some first
    InboxItem.objects.filter(entity_id__in=read).update(read_at=timezone.now())
    unread.refresh(user.pk)
elif mode == "crash":
    real, batches = escalation._admit, []
    def dying(*args):
        admitted = real(*args)
        batches.append(admitted)
        if len(batches) == 3:
            # Mid-drain: two batches finished, the third's escalations admitted (published) but not recorded, and the
            # items after it never claimed.
            os.kill(os.getpid(), signal.SIGKILL)
        return admitted
    escalation._admit = dying
    escalation.drain(batch=10, now=time.time() + 1000)
else:
    print(json.dumps(escalation.drain(now=time.time() + 2000)))  # past the dead drainer's lease
"""


def run(mode, env):
    return subprocess.run(
        [sys.executable, "-c", DRAINER, mode], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(300)
def test_a_drainer_killed_mid_drain_still_makes_exactly_forty_emails(inbox_settings, redis_server, tmp_path):
    channels = {**{name: {"backend": LOCMEM} for name in ("email", "sms", "push")}, "inbox": {"backend": INBOX}}
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "REDIS_URL": redis_server.url,
        "DATABASE_URL": f"sqlite:///{tmp_path}/drainer.db",
        "SLUICE_CHANNELS": json.dumps(channels),
        "SLUICE_KINDS": json.dumps(INBOX_KINDS),
    }
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True, timeout=120)
    filled = run("fill", env)
    assert filled.returncode == 0, filled.stderr
    crashed = run("crash", env)
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr
    client = get_redis()
    # The dead drainer's claims wait out its lease: the third batch of ten, admitted and never finished; the 70 items
    # after it were never claimed.
    assert client.zcard(keys.inbox_escalating("routine")) == 10
    assert client.zcard(keys.inbox_escalations("routine")) == 70
    taken_over = run("drain", env)
    assert taken_over.returncode == 0, taken_over.stderr
    totals = json.loads(taken_over.stdout.strip().splitlines()[-1])
    assert totals["waiting"] == 0
    assert client.zcard(keys.inbox_escalating("routine")) == 0

    with start_worker(
        app,
        pool="threads",
        concurrency=4,
        perform_ping_check=False,
        queues=["routine"],
        loglevel="WARNING",
        shutdown_timeout=30,
    ):
        wait_for(lambda: len(inbox_settings) >= 40, timeout=60, what=lambda: f"40 emails, {len(inbox_settings)} sent")
        wait_for(lambda: settled("routine"), timeout=60, what="every escalation acked")
    assert len(inbox_settings) == 40
    assert len({message.id for message in inbox_settings}) == 40
    assert {message.channel for message in inbox_settings} == {"email"}
    assert sorted(int(m.entity_id[1:]) for m in inbox_settings) == [i for i in range(100) if i % 5 >= 3]
