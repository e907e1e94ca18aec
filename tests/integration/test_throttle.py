"""The per-user throttle is exact across processes: at most ``max`` of a kind in any window, the rest folded."""

import json
import multiprocessing
import time
from collections import Counter

import pytest

from notifications import Outcome, notify
from pipeline import keys
from pipeline.metrics import read_counters
from tests.producers import produce

THROTTLED = {"task.comment": {"class": "routine", "channels": ["email"], "throttle": {"max": 5, "per_s": 60}}}


@pytest.mark.slow
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


def test_the_window_slides(redis_client, user, settings):
    settings.SLUICE_KINDS = {"task.comment": {**THROTTLED["task.comment"], "throttle": {"max": 2, "per_s": 2}}}
    first = [notify(user, "task.comment", entity_id="t") for _ in range(3)]
    assert first == [Outcome.ACCEPTED, Outcome.ACCEPTED, Outcome.FOLDED]
    time.sleep(2.2)  # the first two leave the window: room for two more, not more
    second = [notify(user, "task.comment", entity_id="t") for _ in range(3)]
    assert second == [Outcome.ACCEPTED, Outcome.ACCEPTED, Outcome.FOLDED]
    assert redis_client.zcard(keys.throttle(user.pk, "task.comment")) == 2
    assert 0 < redis_client.ttl(keys.throttle(user.pk, "task.comment")) <= 3  # the log expires by itself
