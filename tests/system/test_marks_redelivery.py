"""A worker killed after a send: the redelivered message finds its sent mark (a kill: the system tier)."""

import json
import time
from collections import Counter

import pytest
from django.contrib.auth import get_user_model

from notifications import Outcome, notify
from pipeline.redis import keys
from sluice_tools.bench.provider import sent_records
from sluice_tools.processes import WorkerProcess
from tests.integration.test_marks import (
    KINDS,
    VISIBILITY_S,
)
from tests.system.test_reliability_worker import RECORDER, UNACKED_INDEX, kill_tree, settled
from tests.waiting import wait_for


@pytest.mark.expected_errors("exited with .signal 9 .SIGKILL.")
@pytest.mark.timeout(120)
def test_a_message_redelivered_after_its_send_finds_its_mark(redis_client, redis_server, settings):
    """kill -9 of the whole worker after email went out and while push is sending: the message comes back after
    the visibility timeout, email finds its mark and is not sent again, push is sent once."""
    settings.SLUICE_KINDS = KINDS
    channels = {
        "email": {"backend": RECORDER, "options": {"latency_ms": 0}},
        "push": {"backend": RECORDER, "options": {"latency_ms": 3000}},
        "sms": {"backend": RECORDER, "options": {"latency_ms": 0}},
    }
    env = {"SLUICE_KINDS": json.dumps(KINDS), "SLUICE_VISIBILITY_TIMEOUT_S": str(VISIBILITY_S)}

    def start():
        return WorkerProcess("routine", redis_server.url, channels, env=env).start()

    running = start()
    try:
        assert notify(get_user_model()(pk=1), "task.assigned", entity_id="redelivered") == Outcome.ACCEPTED
        wait_for(lambda: [r for r in sent_records(redis_client) if r["channel"] == "email"], 30)
        (email,) = sent_records(redis_client)
        wait_for(lambda: redis_client.get(keys.sent(email["id"], "push")) == b"sending", 10)
        kill_tree(running.process)
        running.stop()
        assert redis_client.zcard(UNACKED_INDEX) == 1  # delivered, never acked
        ((_, delivered_at),) = redis_client.zrange(UNACKED_INDEX, 0, -1, withscores=True)
        # A consumer restores what is older than the visibility timeout when it starts: start it after that.
        time.sleep(max(0.0, delivered_at + VISIBILITY_S + 0.3 - time.time()))
        running = start()
        wait_for(lambda: any(r["channel"] == "push" for r in sent_records(redis_client)), 40)
        wait_for(lambda: settled(redis_client, "routine"), 15)
    finally:
        running.stop()
    sends = Counter((r["id"], r["channel"]) for r in sent_records(redis_client))
    assert sends == {(email["id"], "email"): 1, (email["id"], "push"): 1}
