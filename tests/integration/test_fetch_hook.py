"""A worker started through sluice_tools.fetch_hook calls its hook between each fetch and its record (bench kills
pauses there), while the engine itself reads no hook from anywhere."""

import pytest

from sluice_tools.bench.noop import noop
from sluice_tools.processes import WorkerProcess
from tests.waiting import settled, wait_for


@pytest.fixture(params=[False, True], ids=["manage.py worker", "celery -A pipeline worker"])
def hooked_worker(request, redis_server, tmp_path):
    """A critical worker, either command, whose hook appends each fetch's list to a file: yields that file."""
    mark = tmp_path / "fetches"
    worker = WorkerProcess(
        "critical",
        redis_server.url,
        extra=["-c", "1", "-I", "sluice_tools.bench.noop"],
        env={"FETCH_HOOK_MARK": str(mark)},
        plain_celery=request.param,
        fetch_hook="tests.hooks.mark_fetch",
    ).start()
    yield mark
    worker.stop()


def test_the_hook_runs_between_each_fetch_and_its_record(redis_client, hooked_worker):
    mark = hooked_worker
    for _ in range(2):
        noop.apply_async(queue="critical")
    wait_for(lambda: mark.exists() and len(mark.read_text().splitlines()) == 2, timeout=20, what="two fetches")
    wait_for(lambda: settled("critical"), timeout=20, what="both no-ops done")
    assert {line.split()[1] for line in mark.read_text().splitlines()} == {"critical"}
