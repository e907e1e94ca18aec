"""The digest: fold, flush once per user, backpressure, crash recovery, the size trigger and the beat schedule."""

import json
import textwrap

import pytest
from django_celery_beat.models import PeriodicTask

from digest import fold_store
from digest.flush import drain, run_flush
from digest.user_claims import claim_users
from pipeline.redis import keys
from tests.digest_helpers import fold, published

pytestmark = pytest.mark.django_db


def test_flush_sends_one_message_per_user_with_each_keys_count(redis_client, settings):
    for i in range(20):
        fold(1, entity_id="report", payload={"title": "Quarterly report move", "i": i})
    fold(1, entity_id="budget")
    fold(2, entity_id="report")
    assert run_flush("test") == 2
    sent = {m["user_id"]: m for m in published(redis_client)}
    items = {item["entity_id"]: item for item in sent[1]["digest"]["items"]}
    assert {k: item["count"] for k, item in items.items()} == {"report": 20, "budget": 1}
    assert (sent[1]["count"], sent[1]["channels"]) == (21, ["email"])
    assert items["report"]["payload"] == {"title": "Quarterly report move", "i": 19}
    assert items["report"]["first_seen"] <= items["report"]["last_seen"]
    # A user with one key gets that key's own message, as its kind's digest template renders it.
    assert (sent[2]["entity_id"], sent[2]["count"], "digest" in sent[2]) == ("report", 1, False)
    assert redis_client.zcard(keys.pending()) == 0
    assert fold_store.state(redis_client)["last_flush_size"] == 2
    assert run_flush("test") == 0


def test_fold_arriving_during_a_flush_lands_in_the_next_digest(redis_client):
    fold(1, payload={"n": 1})
    members = claim_users("f1", 10, 10, 60, redis_client)
    fold(1, payload={"n": 2})  # arrives after the claim
    assert len(members) == 1
    assert redis_client.zcard(keys.pending()) == 1
    run_flush("test")  # publishes the new fold; f1 still holds the old one and its lease is live
    assert [m["payload"] for m in published(redis_client)] == [{"n": 2}]


def test_full_queue_keeps_digests_pending_until_there_is_room(redis_client, settings):
    settings.SLUICE_QUEUES = {"routine": {"capacity": 2}}
    for user, entity in enumerate("abcd"):
        fold(user, entity_id=entity)  # four users: one message each
    redis_client.lpush("routine", "busy-1")
    assert run_flush("test") == 1
    assert redis_client.zcard(keys.pending()) == 3
    assert redis_client.exists(keys.flush_backlog())  # cut short: the drain task finishes it
    redis_client.delete("routine")
    assert drain() == 2
    redis_client.delete("routine")
    assert drain() == 1
    assert redis_client.zcard(keys.pending()) == 0
    assert run_flush("test") == 0
    assert not redis_client.exists(keys.flush_backlog())
    assert drain() == 0  # no backlog: the drain only moves the overflow


def test_unclaimed_fold_merges_with_one_that_arrived_meanwhile(redis_client):
    for _ in range(3):
        fold(1, payload={"old": True})
    claim_users("f1", 10, 10, 60, redis_client)
    fold(1, payload={"new": True})
    fold_store.unclaim("f1", keys.fold_member(1, "task.comment", "t1"), redis_client)
    run_flush("test")
    [message] = published(redis_client)
    assert (message["count"], message["payload"]) == (4, {"new": True})


CRASHING_FLUSHER = textwrap.dedent(
    """
    import os, signal, django
    django.setup()
    from digest.user_claims import claim_users
    from pipeline.connections import get_redis
    print(claim_users("crashed", 1000, 1000, 1, get_redis()), flush=True)
    os.kill(os.getpid(), signal.SIGKILL)  # dies between claiming and sending
    """
)


def test_size_trigger_enqueues_one_flush_at_max_keys(redis_client, settings):
    settings.SLUICE_DIGEST = {"flush_interval_s": 60, "max_keys": 5}
    settings.SLUICE_QUEUES = {"routine": {"capacity": 1}}
    from django.contrib.auth import get_user_model

    from notifications import notify

    notify(get_user_model()(pk=1), "task.comment", entity_id="fills-the-queue")
    for i in range(12):
        # Twelve users: one digest message each (a user's keys would go out together).
        notify(get_user_model()(pk=i + 2), "task.comment", entity_id=f"t{i}")
    flushes = [json.loads(m) for m in redis_client.lrange("critical", 0, -1)]
    assert [m["headers"]["task"] for m in flushes] == ["sluice.digest.flush"]
    from tests.digest_helpers import published as kwargs_of

    assert kwargs_of(redis_client, "critical")[0] == {"trigger": "size"}
    from digest.flush import flush

    flush("size")  # the routine queue is still full: nothing goes out, and the trigger stays debounced
    assert redis_client.exists(keys.size_trigger())
    assert redis_client.zcard(keys.pending()) == 12
    redis_client.delete("routine")
    flush("size")
    assert redis_client.zcard(keys.pending()) == 11  # room for one message in a queue of capacity 1
    settings.SLUICE_QUEUES = {"routine": {"capacity": 100}}
    flush("size")
    assert redis_client.zcard(keys.pending()) == 0
    assert not redis_client.exists(keys.size_trigger())


@pytest.mark.django_db
def test_beat_schedule_exists_after_migrate():
    task = PeriodicTask.objects.get(task="sluice.digest.flush")
    assert (task.interval.every, task.interval.period, task.enabled) == (60, "seconds", True)
    assert json.loads(task.kwargs) == {"trigger": "beat"}
    assert PeriodicTask.objects.get(task="sluice.overflow.drain").interval.every == 5
