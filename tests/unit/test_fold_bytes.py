"""The fold store's byte bound holds for every key: an existing key's growth (a bigger payload, one more remembered
entity id) is charged against it too, so sluice_digest_store_bytes never passes max_fold_bytes."""

import random

import pytest

from digest.flush import run_flush
from notifications import Outcome, Rejected, notify
from pipeline.redis import keys
from tests.digest_helpers import published

MAX_BYTES = 4000


@pytest.fixture
def full_queues(settings, redis_client):
    settings.SLUICE_QUEUES = {"routine": {"capacity": 1}, "background": {"capacity": 1}}
    redis_client.lpush("routine", "occupied")
    redis_client.lpush("background", "occupied")
    settings.SLUICE_DIGEST = {"max_fold_keys": 4, "max_fold_bytes": MAX_BYTES}


def store_bytes(redis_client):
    return int(redis_client.hget(keys.fold_store_size(), "b") or 0)


@pytest.mark.expected_errors("the fold store is full")
def test_existing_keys_never_grow_the_store_past_its_bound(full_queues, redis_client, user):
    chance = random.Random(24)
    others = [type(user).objects.create_user(f"u{n}") for n in range(3)]
    outcomes = []
    for n in range(400):
        # Ordinary ids (8 to 194 characters) and payloads up to 1.5 KiB, into the same few user and user|kind keys.
        entity = f"{n:06d}-" + "x" * chance.randint(1, 187)
        payload = {"text": "y" * chance.randint(10, 1500)}
        person = (user, *others)[n % 4]
        try:
            outcomes.append(
                notify(person, ("task.comment", "task.due_changed")[n % 2], entity_id=entity, payload=payload)
            )
        except Rejected:
            outcomes.append("rejected")
        assert store_bytes(redis_client) <= MAX_BYTES, f"after event {n}"
    assert Outcome.FOLDED in outcomes
    assert redis_client.hget(keys.fold_store_size(), "k") == b"4"  # the keys are those four users' and no more


@pytest.mark.expected_errors("the fold store is full")
def test_a_bigger_payload_that_does_not_fit_keeps_the_smaller_one(full_queues, settings, redis_client, user):
    settings.SLUICE_DIGEST = {"max_fold_keys": 1, "max_fold_bytes": 1000}
    assert notify(user, "task.comment", entity_id="e1", payload={"v": "small"}) is Outcome.FOLDED
    assert notify(user, "task.comment", entity_id="e1", payload={"v": "z" * 2000}) is Outcome.FOLDED
    assert store_bytes(redis_client) <= 1000
    redis_client.delete("routine")
    settings.SLUICE_QUEUES = {"routine": {"capacity": 100}}
    run_flush("test")
    [digest] = published(redis_client)
    assert (digest["count"], digest["payload"]) == (2, {"v": "small"})  # both events counted, the payload that fit
    assert store_bytes(redis_client) == 0
