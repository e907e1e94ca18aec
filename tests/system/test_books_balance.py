"""Nothing is lost: 10,000 mixed events against slow workers are each delivered, folded or refused, once."""

import json
import random
import subprocess
import sys
import time
from collections import Counter

import pytest
from django.contrib.auth import get_user_model

from digest.flush import run_flush
from notifications import Rejected, notify
from pipeline.broker.depth import snapshot
from pipeline.conf import sluice_settings
from pipeline.redis import keys
from sluice_tools.bench.provider import SENT_KEY, sent_records
from sluice_tools.processes import ROOT, WorkerProcess
from tests.waiting import fetching, wait_for

RECORDER = "sluice_tools.bench.provider.SimulatedProvider"
MIX = [
    ("critical", "meeting.reminder", 600),
    ("routine", "task.comment", 3000),
    ("routine", "task.due_changed", 3000),
    ("routine", "task.assigned", 2000),
    ("background", "board.updated", 1400),
]


def events(seed=7):
    rng = random.Random(seed)
    todo = [(klass, kind) for klass, kind, n in MIX for _ in range(n)]
    rng.shuffle(todo)
    for i, (klass, kind) in enumerate(todo):
        yield i, klass, kind, rng.randint(1, 50), f"{kind.split('.')[0]}-{rng.randint(1, 5)}"


@pytest.mark.expected_errors("for the whole wait budget: rejecting")  # critical rejections are part of the mix
@pytest.mark.django_db
@pytest.mark.timeout(300)
def test_every_event_is_accounted_for_exactly_once(redis_client, redis_server, settings, tmp_path, monkeypatch):
    # Small enough that every class meets its bound however fast the machine lets the producer go: one background
    # slot sends about 50 a second (20 ms a send), well under the producer's share of background events.
    queues = {"critical": {"capacity": 40, "wait_ms": 50}, "routine": {"capacity": 300}, "background": {"capacity": 5}}
    settings.SLUICE_QUEUES = queues
    monkeypatch.setenv("SLUICE_QUEUES", json.dumps(queues))  # the workers' flushes obey the same bounds
    database = f"sqlite:///{tmp_path}/workers.db"
    monkeypatch.setenv("DATABASE_URL", database)  # the critical pool runs size-triggered flushes
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, check=True, timeout=120)
    channels = {n: {"backend": RECORDER, "options": {"latency_ms": 20}} for n in ("email", "sms", "push")}
    workers = [
        WorkerProcess(klass, redis_server.url, channels, extra=["--concurrency", str(c)], loglevel="WARNING")
        for klass, c in (("critical", 1), ("routine", 4), ("background", 1))
    ]
    for worker in workers:
        worker.ready_text = None
    outcomes, folded_by_kind = Counter(), Counter()
    try:
        for worker in workers:
            worker.start()
        wait_for(lambda: fetching(len(workers)), 60, what="every worker connected and fetching")
        users = {pk: get_user_model()(pk=pk) for pk in range(1, 51)}
        for _i, klass, kind, user, entity in events():
            try:
                outcome = str(notify(users[user], kind, entity_id=entity))
            except Rejected:
                outcome = "rejected"
            outcomes[klass, outcome] += 1
            folded_by_kind[kind] += outcome in ("folded", "collapsed")
        deadline = time.monotonic() + 240
        settled = 0
        while time.monotonic() < deadline and settled < 3:
            run_flush("test")
            recorded = redis_client.llen(SENT_KEY)
            time.sleep(1)
            busy = sum(q["depth"] for q in snapshot().values()) or redis_client.zcard(keys.pending())
            busy = busy or redis_client.zcard(keys.claims()) or redis_client.llen(SENT_KEY) != recorded
            # Done once nothing waits and no send landed for three seconds in a row (a loaded machine
            # can hold the last sends for a while).
            settled = 0 if busy else settled + 1
    finally:
        for worker in workers:
            worker.stop()
    assert sum(q["depth"] for q in snapshot().values()) == 0, "messages left in the queues"
    by_id = {r["id"]: r for r in sent_records(redis_client)}  # one record per notification, any channel
    delivered = Counter((r["class"], "digest" if r["id"].startswith("digest-") else "single") for r in by_id.values())
    # A user's digest is one message per channel (issue 28): each channel's digests carry every folded event of the
    # kinds that send on it, once.
    digest_events = Counter()
    for record in {(r["id"], r["channel"]): r for r in sent_records(redis_client)}.values():
        if record["id"].startswith("digest-"):
            digest_events[record["class"], record["channel"]] += record["count"]
    folded_on = Counter()
    for klass, kind, _n in MIX:
        for channel in sluice_settings().kinds[kind].channels:
            folded_on[klass, channel] += folded_by_kind[kind]
    for klass, total in Counter(k for k, _kind, n in MIX for _ in range(n)).items():
        accepted = outcomes[klass, "accepted"]
        folded = outcomes[klass, "folded"] + outcomes[klass, "collapsed"]
        rejected = outcomes[klass, "rejected"]
        assert accepted + folded + rejected == total, klass
        assert delivered[klass, "single"] == accepted, klass
        channels = {c for k, kind, _n in MIX if k == klass for c in sluice_settings().kinds[kind].channels}
        for channel in channels:
            assert digest_events[klass, channel] == folded_on[klass, channel], (klass, channel)
        assert folded == sum(folded_by_kind[kind] for k, kind, _n in MIX if k == klass), klass
    assert outcomes["routine", "folded"] > 0
    assert outcomes["background", "collapsed"] > 0
    assert outcomes["critical", "rejected"] > 0
