"""A digest flusher killed with SIGKILL between its claim and its send: the claim is taken over once its lease ends."""

import os
import signal
import subprocess
import sys
import time

import pytest

from digest.flush import run_flush
from pipeline.redis import keys
from sluice_tools.processes import ROOT
from tests.digest_helpers import fold, published
from tests.unit.test_digest import CRASHING_FLUSHER

pytestmark = pytest.mark.django_db  # the flush rebuilds the preferences' mirror from the database


@pytest.mark.timeout(60)
def test_flusher_killed_between_claim_and_send_is_recovered_once(redis_client, redis_server):
    for user in range(1, 31):
        for _ in range(user):
            fold(user, entity_id="e")
    env = {**os.environ, "REDIS_URL": redis_server.url, "DJANGO_SETTINGS_MODULE": "settings"}
    done = subprocess.run([sys.executable, "-c", CRASHING_FLUSHER], cwd=ROOT, env=env, capture_output=True, timeout=30)
    assert done.returncode == -signal.SIGKILL
    assert redis_client.zcard(keys.pending()) == 0
    assert run_flush("test") == 0  # the lease is still live: nobody takes the claim over yet
    time.sleep(1.2)  # the dead flusher's lease runs out: the test is about that lease
    assert run_flush("test") == 30
    assert run_flush("test") == 0
    messages = published(redis_client)
    assert sorted(m["count"] for m in messages) == list(range(1, 31))
    assert len({m["notification_id"] for m in messages}) == 30
    assert all(m["notification_id"].startswith("digest-crashed-") for m in messages)
    assert redis_client.zcard(keys.claims()) == 0
