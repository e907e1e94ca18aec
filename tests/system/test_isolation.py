"""Isolation across pools: a critical event is delivered while a routine backlog is still waiting."""

import time

import pytest

from notifications import notify
from sluice_tools.bench.provider import SENT_KEY, sent_records
from sluice_tools.processes import WorkerProcess

RECORDER = "sluice_tools.bench.provider.SimulatedProvider"


def channels(delay_ms):
    return {name: {"backend": RECORDER, "options": {"latency_ms": delay_ms}} for name in ("email", "sms", "push")}


@pytest.mark.timeout(180)
def test_critical_is_delivered_behind_5000_waiting_routine(redis_client, redis_server, user, settings):
    settings.SLUICE_QUEUES = {"routine": {"capacity": 6000}}  # all 5,000 wait in the queue, none fold
    # A slow routine pool (2 threads, 50 ms a send) keeps the backlog there for minutes.
    routine = WorkerProcess("routine", redis_server.url, channels(50), extra=["--concurrency", "2"])
    critical = WorkerProcess("critical", redis_server.url, channels(0), extra=["--concurrency", "1"])
    try:
        routine.start()
        critical.start()
        for i in range(5000):
            notify(user, "task.comment", entity_id=f"task-{i}")
        notify(user, "meeting.reminder", entity_id="standup")
        published = time.time()
        deadline = time.monotonic() + 30
        found = None
        while found is None and time.monotonic() < deadline:
            found = next((r for r in sent_records(redis_client) if r["class"] == "critical"), None)
            time.sleep(0.05)
        backlog = redis_client.llen("routine")
        assert found is not None, "critical was not delivered within 30 s"
        assert found["kind"] == "meeting.reminder"
        assert found["started"] - published < 10
        # Isolation, not luck: the routine backlog was still there when critical went out.
        assert backlog > 4000
        assert redis_client.llen(SENT_KEY) < 1000
    finally:
        critical.stop()
        routine.stop()


@pytest.mark.timeout(120)
def test_plain_celery_worker_command_consumes_a_class_queue(redis_client, redis_server, user):
    worker = WorkerProcess("critical", redis_server.url, channels(0), plain_celery=True, extra=["-c", "1"])
    try:
        worker.start()
        notify(user, "meeting.cancelled", entity_id="m-9")
        deadline = time.monotonic() + 20
        while redis_client.llen(SENT_KEY) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert {r["channel"] for r in sent_records(redis_client)} == {"push", "email"}
        assert redis_client.llen("critical") == 0
    finally:
        worker.stop()
