"""Issue 35: the digest flush works in steps on the critical pool: within its budget (at least one batch), under one
lease per fold store, and what it leaves is the drain task's backlog."""

import pytest

from digest import flush
from pipeline import housekeeping
from pipeline.redis import keys
from tests.digest_helpers import fold, published

pytestmark = pytest.mark.django_db
STORE = "routine+background"  # the one fold store of the tests: both folding classes on one Redis


def test_a_flush_step_stops_at_its_budget_and_the_drain_takes_the_rest(redis_client, monkeypatch):
    for user in range(30):
        fold(user, entity_id="report")
    monkeypatch.setattr(housekeeping, "STEP_BUDGET_S", 0)
    monkeypatch.setattr(flush, "BATCH", 10)
    assert flush.flush() == 10  # one batch of whole users, then its budget is spent
    assert redis_client.exists(keys.flush_backlog())
    assert housekeeping.behind(redis_client)[(flush.FLUSH_TASK, STORE)] >= 0
    assert flush.drain() == 10
    assert flush.drain() == 10
    assert flush.drain() == 0  # the backlog cleared: the drain moves overflows again
    assert not redis_client.exists(keys.flush_backlog())
    assert sorted(m["user_id"] for m in published(redis_client)) == list(range(30))


def test_a_flush_finds_the_stores_lease_held_and_leaves_its_folds_to_that_flush(redis_client):
    fold(1, entity_id="report")
    with housekeeping.step(flush.FLUSH_TASK, STORE, redis_client) as running:
        assert running is not None
        assert flush.flush() == 0
        assert redis_client.zcard(keys.pending()) == 1
    assert flush.flush() == 1
    assert redis_client.hget(keys.counters(), f"housekeeping:{flush.FLUSH_TASK}:{STORE}:skipped") == b"1"
