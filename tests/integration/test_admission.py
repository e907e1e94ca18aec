"""Bounded admission: exact bounds, critical waits then rejects, routine folds, background collapses."""

import json
import logging
import threading
import time
from collections import Counter

import pytest

from notifications import Outcome, Rejected, notify, preferences
from notifications.exceptions import QueueCeilingReached
from pipeline.broker.depth import snapshot
from pipeline.redis import keys


@pytest.fixture
def small_queues(settings):
    def configure(**queues):
        settings.SLUICE_QUEUES = queues

    return configure


def counters(client):
    return {k.decode(): int(v) for k, v in client.hgetall(keys.counters()).items()}


def test_routine_folds_once_its_queue_is_full(redis_client, user, small_queues):
    small_queues(routine={"capacity": 10})
    outcomes = Counter(notify(user, "task.comment", entity_id="t1", payload={"n": i}) for i in range(15))
    assert outcomes == {Outcome.ACCEPTED: 10, Outcome.FOLDED: 5}
    assert redis_client.llen("routine") == 10
    fold = redis_client.hgetall(keys.fold(keys.fold_member(user.pk, "task.comment", "t1")))
    assert int(fold[b"n"]) == 5
    assert json.loads(fold[b"p"]) == {"n": 14}
    assert float(fold[b"f"]) <= float(fold[b"l"])
    assert counters(redis_client) == {
        "notifications:routine:accepted": 10,
        "notifications:routine:folded": 5,
        "folds:routine:overflow": 5,  # folded because the queue was full
        "foldgrain:routine:entity": 5,  # per user|kind|entity: the store was far from its bound
    }


def test_background_collapses_to_the_latest_state(redis_client, user, small_queues):
    small_queues(background={"capacity": 2})
    outcomes = [notify(user, "board.updated", entity_id="b1", payload={"v": i}) for i in range(6)]
    assert outcomes == [Outcome.ACCEPTED] * 2 + [Outcome.COLLAPSED] * 4
    fold = redis_client.hgetall(keys.fold(keys.fold_member(user.pk, "board.updated", "b1")))
    assert (int(fold[b"n"]), json.loads(fold[b"p"])) == (4, {"v": 5})
    assert counters(redis_client)["notifications:background:collapsed"] == 4


def test_fold_keys_never_collide_on_separators(redis_client, user, small_queues):
    small_queues(routine={"capacity": 1})
    notify(user, "task.comment", entity_id="filler")
    notify(user, "task.comment", entity_id="a|b")
    notify(user, "task.comment", entity_id='a","b')
    notify(user, "task.due_changed", entity_id="a|b")
    assert redis_client.zcard(keys.pending()) == 3


@pytest.mark.expected_errors("full .* for the whole wait budget: rejecting")
def test_critical_waits_about_wait_ms_then_is_rejected_loudly(redis_client, user, small_queues, caplog):
    small_queues(critical={"capacity": 3, "wait_ms": 200})
    for i in range(3):
        assert notify(user, "meeting.reminder", entity_id=f"m{i}") is Outcome.ACCEPTED
    caplog.set_level(logging.ERROR, logger="sluice.admission")
    started = time.monotonic()
    with pytest.raises(Rejected) as refused:
        notify(user, "meeting.reminder", entity_id="m3")
    waited = time.monotonic() - started
    # Order of magnitude only: it waited for room, and it did not hang.
    assert 0.1 < waited < 2.0
    assert refused.value.retry_after >= 1
    for _ in range(4):
        with pytest.raises(Rejected):
            notify(user, "meeting.reminder", entity_id="m4")
    assert redis_client.llen("critical") == 3
    assert counters(redis_client)["notifications:critical:rejected"] == 5
    # One log line for the burst, not one per event.
    assert len([r for r in caplog.records if "rejecting" in r.getMessage()]) == 1


def test_critical_gets_in_when_room_frees_within_the_wait(redis_client, user, small_queues):
    small_queues(critical={"capacity": 1, "wait_ms": 1000})
    notify(user, "meeting.reminder", entity_id="m0")
    threading.Timer(0.1, lambda: redis_client.rpop("critical")).start()
    assert notify(user, "meeting.reminder", entity_id="m1") is Outcome.ACCEPTED
    assert redis_client.llen("critical") == 1


@pytest.mark.django_db(transaction=True)
@pytest.mark.expected_errors("overflow for users who chose instant delivery is full: rejecting")
def test_a_user_who_chose_instant_waits_in_the_overflow_then_is_rejected(redis_client, user, small_queues):
    small_queues(routine={"capacity": 2})
    preferences.set(user, mode="instant")  # every kind, every channel: never folded
    outcomes = [notify(user, "task.assigned", entity_id="t") for _ in range(4)]
    assert outcomes == [Outcome.ACCEPTED] * 2 + [Outcome.DEFERRED] * 2
    with pytest.raises(Rejected, match="overflow are full"):
        notify(user, "task.assigned", entity_id="t")
    assert redis_client.llen(keys.overflow("routine")) == 2
    assert redis_client.zcard(keys.pending()) == 0


@pytest.mark.django_db(transaction=True)
def test_instant_for_one_kind_only(redis_client, user, small_queues):
    small_queues(routine={"capacity": 1})
    preferences.set(user, kind="task.comment", mode="instant")
    notify(user, "task.assigned", entity_id="t")
    assert notify(user, "task.comment", entity_id="t") is Outcome.DEFERRED
    assert notify(user, "task.assigned", entity_id="t") is Outcome.FOLDED


def test_the_ceiling_is_an_error_on_every_path(redis_client, user, small_queues):
    small_queues(background={"capacity": 2, "ceiling": 3})
    redis_client.lpush("background", "x", "y", "z")  # as a bug elsewhere might
    with pytest.raises(QueueCeilingReached, match="hard ceiling of 3"):
        notify(user, "board.updated", entity_id="b")
    from notifications.delivery.tasks import send_tasks

    with pytest.raises(QueueCeilingReached):
        send_tasks["background"].apply_async(kwargs={})
    assert redis_client.llen("background") == 3


def test_celery_publishes_still_work_below_the_ceiling(redis_client):
    from notifications.delivery.tasks import send_tasks

    send_tasks["routine"].apply_async(kwargs={"notification_id": "x"})
    message = json.loads(redis_client.lindex("routine", 0))
    assert message["headers"]["task"] == "sluice.send.routine"
    assert isinstance(message["headers"]["published_at"], float)


def test_snapshot_counts_priority_sub_lists(redis_client):
    redis_client.lpush("routine", "a")
    redis_client.lpush(keys.priority_lists("routine")[2], "b", "c")
    assert snapshot()["routine"] == {
        "queue": "routine",
        "capacity": 2048,
        "ceiling": 4096,
        "depth": 3,
        "partitions": [],
    }
