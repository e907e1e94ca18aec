"""What a worker's log says at INFO, Sluice's default for `manage.py worker`: one line per batch and per flush, and a
failed last attempt says it was dead-lettered, not that it will retry."""

import logging

from digest.flush import run_flush
from notifications import notify
from notifications.channels import locmem
from pipeline.broker import deadletters
from pipeline.broker.profiles import worker_argv
from tests.conftest import wait_for
from tests.integration import test_batches, test_send_failures

worker = test_send_failures.worker
worker_on = test_batches.worker_on


def lines(caplog, logger):
    return [r.getMessage() for r in caplog.records if r.name == logger]


def test_manage_py_worker_logs_at_info_unless_told_otherwise():
    argv = worker_argv("routine")
    assert argv[argv.index("--loglevel") + 1] == "INFO"
    told = worker_argv("routine", ["--loglevel", "WARNING"])
    assert told[len(told) - 1 - told[::-1].index("--loglevel") + 1] == "WARNING"  # the last one wins in Celery


def test_the_last_failed_attempt_says_dead_lettered(worker, user, caplog):
    caplog.set_level(logging.WARNING, logger="sluice.send")
    worker.plan["email"] = ["transient"] * 6
    notify(user, "meeting.invitation", entity_id="m-1")
    assert wait_for(lambda: deadletters.size() == 1)
    failed = [line for line in lines(caplog, "sluice.send") if " on email failed" in line]
    assert len(failed) == 6
    assert all(", will retry: " in line for line in failed[:5])
    assert ", dead-lettered after 6 attempts: " in failed[5]


class Recorded(logging.Handler):
    """The lines of one logger, whatever the worker does to the root logger's handlers when it starts."""

    def __init__(self, name):
        super().__init__(logging.INFO)
        self.logger, self.lines = logging.getLogger(name), []

    def emit(self, record):
        self.lines.append(record.getMessage())

    def __enter__(self):
        self.level, _ = self.logger.level, self.logger.addHandler(self)
        self.logger.setLevel(logging.INFO)
        return self

    def __exit__(self, *exc):
        self.logger.removeHandler(self)
        self.logger.setLevel(self.level)


def test_a_batch_logs_one_line_of_how_its_messages_ended(worker_on, settings, redis_client):
    test_batches.channels(settings, test_batches.LOCMEM)
    settings.SLUICE_QUEUES = {"background": {"batch": 1000}}
    with worker_on(), Recorded("sluice.batch") as recorded:
        # All twelve at once (one transaction), once the line is recorded: the worker takes them as one batch.
        pipe = redis_client.pipeline()
        test_batches.enqueue(pipe, 12)
        pipe.execute()
        assert wait_for(lambda: len(locmem.outbox) >= 12)
        assert wait_for(lambda: recorded.lines)
    [line] = recorded.lines
    assert line == "batch (background): 12 messages: 12 done, 0 retried, 0 dead-lettered, 0 requeued, 0 given back"


def test_an_empty_flush_still_logs_its_line(redis_client, db, caplog):
    caplog.set_level(logging.INFO, logger="sluice.digest")
    run_flush("beat")
    assert "flush (beat): 0 digest messages published, 0 overflow messages moved" in lines(caplog, "sluice.digest")
