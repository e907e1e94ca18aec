"""The queue bound is exact across eight producer processes (the system tier: processes racing for a while)."""

import json
import multiprocessing
import threading
from collections import Counter

import pytest

from pipeline.redis import keys
from tests.producers import produce


@pytest.mark.timeout(180)
def test_bound_is_exact_across_eight_producer_processes(redis_client, redis_server, monkeypatch):
    monkeypatch.setenv("SLUICE_QUEUES", json.dumps({"routine": {"capacity": 1000}}))
    highest = 0
    stop = threading.Event()

    def watch():
        nonlocal highest
        while not stop.is_set():
            highest = max(highest, redis_client.llen("routine"))

    watcher = threading.Thread(target=watch)
    watcher.start()
    context = multiprocessing.get_context("spawn")
    barrier = context.Manager().Barrier(8)
    with context.Pool(8) as pool:
        results = pool.starmap(produce, [("task.comment", 2000, 1, f"p{n}", barrier) for n in range(8)])
    stop.set()
    watcher.join()
    total = sum(results, Counter())
    assert sum(total.values()) == 16000  # every call got a definite outcome
    assert total == {"accepted": 1000, "folded": 15000}
    assert redis_client.llen("routine") == 1000
    assert highest <= 1000
    folded = sum(int(redis_client.hget(keys.fold(m.decode()), "n")) for m in redis_client.zrange(keys.pending(), 0, -1))
    assert folded == 15000
