"""Housekeeping steps: one per task and scope at a time (a lease), a budget, what they left, and one next step."""

import time

import pytest

from pipeline import housekeeping
from pipeline.redis import keys


def test_a_second_step_of_a_task_in_the_same_scope_does_nothing_while_the_first_runs(redis_client):
    with housekeeping.step("t", "routine", redis_client) as first:
        assert first is not None
        with housekeeping.step("t", "routine", redis_client) as second:
            assert second is None
        with housekeeping.step("t", "critical", redis_client) as other_scope:
            assert other_scope is not None
    with housekeeping.step("t", "routine", redis_client) as after:
        assert after is not None  # the first released its lease
    assert redis_client.hget(keys.counters(), "housekeeping:t:routine:skipped") == b"1"
    assert redis_client.hget(keys.counters(), "housekeeping:t:routine:caught_up") == b"2"


def test_a_step_that_outlived_its_lease_does_not_release_the_next_steps(redis_client):
    slow = housekeeping.step("t", "routine", redis_client, lease_s=0.05)
    assert slow.__enter__() is not None
    time.sleep(0.1)  # the lease running out is the point
    taken_over = housekeeping.step("t", "routine", redis_client)
    assert taken_over.__enter__() is not None
    held = redis_client.get(keys.housekeeping_lease("t", "routine"))
    slow.__exit__(None, None, None)  # the slow one ends while the second still runs
    assert redis_client.get(keys.housekeeping_lease("t", "routine")) == held
    taken_over.__exit__(None, None, None)
    assert redis_client.get(keys.housekeeping_lease("t", "routine")) is None


def test_a_step_is_over_once_its_budget_is_spent():
    step = housekeeping.Step("t", "routine", budget_s=0.02)
    assert not step.over()
    time.sleep(0.03)  # the budget running out is the point
    assert step.over()
    assert not housekeeping.unbounded().over()


def test_a_task_that_leaves_work_is_behind_from_its_first_such_step_until_one_catches_up(redis_client):
    for _ in range(2):
        with housekeeping.step("t", "routine", redis_client) as step:
            step.more = True
    behind = housekeeping.behind(redis_client)[("t", "routine")]
    assert 0 <= behind < 5
    since = float(redis_client.hget(keys.housekeeping_state(), "t:routine:behind_since"))
    assert housekeeping.behind(redis_client, now=since + 100)[("t", "routine")] == pytest.approx(100)
    with housekeeping.step("t", "routine", redis_client):
        pass
    assert housekeeping.behind(redis_client) == {("t", "routine"): 0.0}


class Recorder:
    name = "sluice.test.step"

    def __init__(self):
        self.published = []

    def apply_async(self, **options):
        self.published.append(options)


def test_a_task_asks_for_one_next_step_until_that_one_starts(redis_client):
    task = Recorder()
    assert housekeeping.again(task, "routine", redis_client, queue="routine")
    assert not housekeeping.again(task, "routine", redis_client, queue="routine")
    assert task.published == [{"queue": "routine"}]
    with housekeeping.step(task.name, "routine", redis_client) as step:
        assert step is not None
        # The queued step is running: it may ask for the next one.
        assert housekeeping.again(task, "routine", redis_client, queue="routine")
    assert len(task.published) == 2


def test_a_next_step_that_could_not_be_published_leaves_the_way_open(redis_client):
    class Failing(Recorder):
        def apply_async(self, **options):
            raise ConnectionError("broker away")

    with pytest.raises(ConnectionError):
        housekeeping.again(Failing(), "routine", redis_client)
    assert redis_client.get(keys.housekeeping_queued(Failing.name, "routine")) is None
