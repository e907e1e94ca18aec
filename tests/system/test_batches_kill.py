"""A worker killed with SIGKILL in the middle of a batch loses nothing (kill loop: the system tier)."""

import signal

import pytest

from pipeline.redis import keys
from sluice_tools.bench.provider import sent_records
from sluice_tools.processes import WorkerProcess
from tests.integration.test_batches import (
    enqueue,
)
from tests.waiting import settled, wait_for


@pytest.mark.timeout(180)
@pytest.mark.expected_errors("exited with .signal 9")
def test_a_worker_killed_mid_batch_loses_nothing(redis_server, redis_client):
    # No bulk call: one message a call, so the batch is still under way when it is killed.
    provider = {
        "backend": "sluice_tools.bench.provider.SimulatedProvider",
        "options": {"latency_ms": 30},
    }
    channels_conf = {name: provider for name in ("email", "sms", "push")}
    ids = enqueue(redis_client, 300)
    env = {"SLUICE_FETCH_DEAD_AFTER_S": "3", "SLUICE_VISIBILITY_TIMEOUT_S": "10"}
    first = WorkerProcess(
        "background", redis_server.url, channels=channels_conf, extra=["--concurrency", "1"], env=env
    ).start()
    try:
        wait_for(lambda: redis_client.llen("sluice:bench:sent") >= 20, timeout=60)
        first.process.send_signal(signal.SIGKILL)  # a threads pool: the batch runs in this one process
        first.process.wait()
        held = sum(redis_client.llen(key) for key in redis_client.keys(keys.fetch_prefix() + "*batch-*:processing:*"))
        assert held > 100  # the batch held most of them when it died
    finally:
        first.stop()
    second = WorkerProcess(
        "background", redis_server.url, channels=channels_conf, extra=["--concurrency", "1"], env=env
    ).start()
    try:
        wait_for(lambda: len({r["id"] for r in sent_records(redis_client)}) >= 300, timeout=120)
        wait_for(lambda: settled("background"), what="the second worker acked everything")
    finally:
        second.stop()
    records = [r["id"] for r in sent_records(redis_client)]
    assert sorted(set(records)) == ids  # lost: none
    # A duplicate only from the send under way when the kill came: the provider returned, "sent" was not recorded.
    assert len(records) - len(set(records)) <= 1
    assert redis_client.llen("background") == 0
