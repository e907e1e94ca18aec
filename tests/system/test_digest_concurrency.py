"""Several flusher processes race while folds keep arriving: every fold is delivered once, counts add up."""

import multiprocessing

import pytest

from digest.flush import run_flush
from pipeline.redis import keys
from tests.digest_helpers import published
from tests.producers import flush_loop, fold_loop


@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(180)
def test_concurrent_flushers_and_folders(redis_client, redis_server, monkeypatch, tmp_path, settings):
    # Child processes share one file database (the opt-out sync reads it) and the test's Redis.
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path}/children.db")
    # Room for every digest message: this test is about races, not backpressure.
    monkeypatch.setenv("SLUICE_QUEUES", '{"routine": {"capacity": 100000}}')
    settings.SLUICE_QUEUES = {"routine": {"capacity": 100000}}
    import subprocess
    import sys

    from sluice_tools.processes import ROOT

    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, check=True, timeout=120)
    context = multiprocessing.get_context("spawn")
    with context.Pool(5) as pool:
        flushers = [pool.apply_async(flush_loop, (6,)) for _ in range(3)]
        folders = [pool.apply_async(fold_loop, (3000, base)) for base in (100, 200)]
        folded = sum(f.get(timeout=120) for f in folders)
        from_processes = sum(f.get(timeout=120) for f in flushers)
    while run_flush("final"):
        pass
    messages = published(redis_client)
    assert folded == 6000
    assert from_processes > 0, "the flushers never overlapped with the folding"
    assert sum(m["count"] for m in messages) == folded
    assert len({m["notification_id"] for m in messages}) == len(messages)
    assert redis_client.zcard(keys.pending()) == 0
    assert redis_client.zcard(keys.claims()) == 0
