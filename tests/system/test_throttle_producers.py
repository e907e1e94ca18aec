"""The per-user throttle is exact across eight producer processes (the system tier: processes racing for a while)."""

import json
import multiprocessing
from collections import Counter

import pytest

from pipeline.metrics import read_counters
from tests.integration.test_throttle import (
    THROTTLED,
)
from tests.producers import produce


@pytest.mark.timeout(180)
def test_never_more_than_max_in_a_window_across_eight_processes(redis_client, redis_server, monkeypatch):
    monkeypatch.setenv("SLUICE_KINDS", json.dumps(THROTTLED))
    context = multiprocessing.get_context("spawn")
    barrier = context.Manager().Barrier(8)
    with context.Pool(8) as pool:
        results = pool.starmap(produce, [("task.comment", 40, 1, f"p{n}", barrier) for n in range(8)])
    outcomes = sum(results, Counter())
    # 320 events of one user within far less than the 60 s window: exactly 5 get through, the rest fold.
    assert outcomes == {"accepted": 5, "folded": 315}
    assert redis_client.llen("routine") == 5
    assert read_counters()["folds:routine:throttle"] == 315
