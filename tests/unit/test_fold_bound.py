"""The fold store is bounded: under pressure it folds coarser (user|kind, then the user), then refuses loudly; a full
Redis is Unavailable (503), never a 500."""

import json

import pytest
from django.test import Client

from digest.flush import run_flush
from notifications import Outcome, Rejected, Unavailable, notify, user_digest
from notifications.models import IngestToken
from pipeline.conf import sluice_settings
from pipeline.metrics import read_counters
from pipeline.redis import keys
from sluice_tools.redis_server import RedisServer
from sluice_tools.redis_target import use_redis
from tests.digest_helpers import published


@pytest.fixture
def full_queues(settings, redis_client):
    settings.SLUICE_QUEUES = {"routine": {"capacity": 1}, "background": {"capacity": 1}}
    redis_client.lpush("routine", "occupied")
    redis_client.lpush("background", "occupied")


@pytest.mark.expected_errors("the fold store is full")
def test_new_keys_fold_coarser_as_the_store_fills_then_are_refused(full_queues, settings, redis_client, user):
    settings.SLUICE_DIGEST = {"max_fold_keys": 10, "max_fold_bytes": 1_000_000}
    other = type(user).objects.create_user("other")
    outcomes = [notify(user, "task.comment", entity_id=f"t{i}") for i in range(7)]
    outcomes += [notify(user, "task.due_changed", entity_id=f"t{i}") for i in range(3)]
    outcomes += [notify(other, "task.comment", entity_id="x"), notify(other, "task.due_changed", entity_id="x")]
    assert set(outcomes) == {Outcome.FOLDED}
    counters = read_counters()
    # Five keys per entity (below half of the bound), then user|kind keys (below 80%), then one per user.
    assert counters["foldgrain:routine:entity"] == 5  # task.comment t0..t4
    assert counters["foldgrain:routine:kind"] == 2 + 3 + 1  # comment t5, t6; due_changed t0..t2; other's comment
    assert counters["foldgrain:routine:user"] == 1  # the other user's due_changed: the ninth key
    assert redis_client.hget(keys.fold_store_size(), "k") == b"9"
    # The bound is reached only by new keys: an existing key of any grain still takes events.
    assert notify(user, "task.comment", entity_id="t99") is Outcome.FOLDED
    third = type(user).objects.create_user("third")
    assert notify(third, "task.comment", entity_id="y") is Outcome.FOLDED  # the tenth key
    with pytest.raises(Rejected, match="digest's store are full") as refused:
        notify(type(user).objects.create_user("fourth"), "task.comment", entity_id="z")
    assert refused.value.retry_after >= 1
    assert read_counters()["notifications:routine:rejected"] == 1


def test_coarse_digests_say_how_many_events_across_how_many_items(full_queues, settings, redis_client, user):
    settings.SLUICE_DIGEST = {"max_fold_keys": 5, "max_fold_bytes": 1_000_000}
    for entity in ("e1", "e2", "e3"):
        notify(user, "task.comment", entity_id=entity)  # keys 1-3: per entity, below half of the bound
    for i in range(8):
        notify(user, "task.due_changed", entity_id=f"d{i % 4}")  # key 4: user|kind, below 80%
    for i in range(36):
        notify(user, "task.assigned" if i % 2 else "task.comment", entity_id=f"n{i % 12}")  # key 5: the user's
    counters = read_counters()
    assert (counters["foldgrain:routine:kind"], counters["foldgrain:routine:user"]) == (8, 36)
    redis_client.delete("routine")
    settings.SLUICE_QUEUES = {"routine": {"capacity": 100}}
    run_flush("test")
    # The user's one email digest lists each fold, the coarse ones saying across how many items and kinds.
    [email] = [m for m in published(redis_client) if m["channels"] == ["email"]]
    items = {item["grain"]: item for item in email["digest"]["items"]}
    assert (items["user"]["count"], items["user"]["entities"], items["user"]["kinds"]) == (36, 12, 2)
    body = user_digest.render(email["digest"], None, sluice_settings().kinds).body
    assert "- Task due changed: 8 updates across 4 items" in body  # the kind's title, never its key
    assert "- 36 notifications across 2 kinds and 12 items" in body
    assert email["count"] == 3 + 8 + 36
    assert redis_client.hgetall(keys.fold_store_size()) == {b"k": b"0", b"b": b"0"}


def test_the_byte_bound_counts_payloads(full_queues, settings, redis_client, user):
    settings.SLUICE_DIGEST = {"max_fold_keys": 1000, "max_fold_bytes": 3000}
    big = {"text": "x" * 600}
    grains = [notify(user, "task.comment", entity_id=f"e{i}", payload=big) for i in range(6)]
    assert set(grains) == {Outcome.FOLDED}
    counters = read_counters()
    assert counters["foldgrain:routine:entity"] == 2  # 2 x ~613 bytes: the next would pass half of 3000
    assert int(redis_client.hget(keys.fold_store_size(), "b")) <= 3000


@pytest.fixture
def small_redis(redis_server, settings):
    """A Redis of its own that refuses writes past 2 MB (maxmemory, noeviction), Sluice pointed at it."""
    server = RedisServer("--maxmemory", "2mb", "--maxmemory-policy", "noeviction").start()
    saved = settings.SLUICE_REDIS_URL
    use_redis(server.url)
    yield server
    use_redis(saved)
    server.stop()


@pytest.mark.django_db
@pytest.mark.expected_errors("Service Unavailable: /api/notifications/")
def test_a_full_redis_is_unavailable_and_ingest_answers_503_never_500(small_redis, user):
    import redis

    filler = redis.Redis.from_url(small_redis.url)
    try:
        with pytest.raises(redis.exceptions.OutOfMemoryError):
            for i in range(10_000):
                filler.set(f"filler:{i}", "x" * 10_000)
    finally:
        filler.close()
    with pytest.raises(Unavailable, match="out of memory"):
        notify(user, "task.comment", entity_id="t")
    token = IngestToken(name="billing")
    raw = token.set_new_token()
    token.save()
    body = {"user": user.pk, "kind": "meeting.reminder", "entity_id": "m", "payload": {}}
    response = Client().post(
        "/api/notifications/", json.dumps(body), content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {raw}"
    )
    assert response.status_code == 503, response.content
    assert response.json()["error"] == "unavailable"
