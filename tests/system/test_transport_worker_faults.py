"""The reliable fetch against worker faults: frozen in its fetch and killed; dead of an error."""

import signal

import psutil
import pytest

from notifications import notify
from sluice_tools.bench.provider import sent_records
from sluice_tools.processes import WorkerProcess
from tests.integration.test_transport import (
    RECORDER,
    blocked_in_fetch,
    crashing_worker,
    publish,
)
from tests.waiting import wait_for


@pytest.mark.timeout(120)
def test_a_worker_frozen_in_its_fetch_and_killed_loses_nothing(redis_server, redis_client, user):
    # SIGSTOP keeps the worker's socket open, as a process that is dying does for a few milliseconds: Redis
    # still hands it the next message. Before the reliable fetch that message was lost with the process.
    env = {"SLUICE_FETCH_DEAD_AFTER_S": "3"}
    frozen = WorkerProcess("routine", redis_server.url, RECORDER, extra=["--concurrency", "1"], env=env).start()
    wait_for(lambda: blocked_in_fetch(redis_client), 10)
    family = [psutil.Process(frozen.process.pid), *psutil.Process(frozen.process.pid).children(recursive=True)]
    try:
        for member in family:
            member.send_signal(signal.SIGSTOP)
        outcome = notify(user, "task.comment", entity_id="t-1")
        assert str(outcome) == "accepted"
        wait_for(lambda: redis_client.llen("routine") == 0, 5, what="the frozen worker received it")
    finally:
        for member in family:
            member.send_signal(signal.SIGKILL)
        frozen.process.wait(10)
    successor = WorkerProcess("routine", redis_server.url, RECORDER, extra=["--concurrency", "1"], env=env).start()
    try:
        wait_for(lambda: len(sent_records(redis_client)) == 1, 30, what="the message sent (not lost with the worker)")
    finally:
        successor.stop()


@pytest.mark.timeout(90)
@pytest.mark.expected_errors("Unrecoverable error", "injected: delivery crashed")
@pytest.mark.parametrize("plain_celery", [False, True], ids=["manage.py worker", "celery worker"])
def test_a_worker_that_dies_of_an_error_exits_non_zero_and_gives_its_message_back(
    redis_server, redis_client, plain_celery
):
    worker = crashing_worker(redis_server.url, plain_celery).start()
    publish()
    try:
        worker.process.wait(30)
    finally:
        worker.stop()
    assert "Unrecoverable error" in worker.output()
    assert worker.process.returncode not in (0, None)
    assert redis_client.llen("critical") == 1
