"""Issue 29, item 5: a flush claims each class's keys only up to the room of that class's own queue."""

import json

import pytest

from digest import user_claims
from digest.flush import run_flush
from pipeline.redis import keys
from tests.digest_helpers import fold, published

pytestmark = pytest.mark.django_db  # the flush rebuilds the preferences' mirror from the database

ROUTINE_KIND, BACKGROUND_KIND = "task.comment", "board.updated"
KIND_CLASS = {ROUTINE_KIND: "routine", BACKGROUND_KIND: "background"}


def fill(client, queue, n):
    """Take ``n`` slots of ``queue`` with messages no worker will ever see (no worker runs in the unit tier)."""
    client.lpush(queue, *[json.dumps({"filler": i}) for i in range(n)])


def unfill(client, queue, n):
    """Free the slots fill() took, leaving what a flush published."""
    for i in range(n):
        client.lrem(queue, 0, json.dumps({"filler": i}))


@pytest.fixture
def claims(monkeypatch):
    """Every claim a flush makes, as {class: how many keys it took}, in order."""
    seen = []

    def recorded(*args, **kwargs):
        members = real(*args, **kwargs)
        taken = {}
        for member in members:
            klass = KIND_CLASS[json.loads(member)[1]]
            taken[klass] = taken.get(klass, 0) + 1
        seen.append(taken)
        return members

    real = user_claims.claim_users
    monkeypatch.setattr(user_claims, "claim_users", recorded)
    return seen


@pytest.mark.parametrize(("nearly_full", "empty"), [("routine", "background"), ("background", "routine")])
def test_a_class_with_little_room_claims_no_more_than_its_room(redis_client, settings, claims, nearly_full, empty):
    settings.SLUICE_QUEUES = {"routine": {"capacity": 100}, "background": {"capacity": 100}}
    fill(redis_client, nearly_full, 97)  # room for 3
    kind = {"routine": ROUTINE_KIND, "background": BACKGROUND_KIND}
    for user in range(20):
        fold(user, kind=kind[nearly_full], entity_id="a")
        fold(user, kind=kind[empty], entity_id="b")

    assert run_flush("test") == 3 + 20
    # The full class took its 3 keys (in one claim or over several, each within the room left then), never the
    # other class's room: the rest of its keys wait, pending.
    assert sum(claim.get(nearly_full, 0) for claim in claims) == 3
    assert all(claim.get(nearly_full, 0) <= 3 for claim in claims)
    assert len(published(redis_client, empty)) == 20
    unfill(redis_client, nearly_full, 97)
    assert len(published(redis_client, nearly_full)) == 3
    assert redis_client.zcard(keys.pending()) == 20 - 3
    assert redis_client.exists(keys.flush_backlog())  # the drain finishes the flush as room frees


def test_a_user_keeps_one_digest_when_only_their_class_has_room(redis_client, settings, claims):
    # Routine full, background with room: every user's background keys go, their routine keys wait whole, and go
    # as one digest per user once routine has room again.
    settings.SLUICE_QUEUES = {"routine": {"capacity": 10}, "background": {"capacity": 100}}
    fill(redis_client, "routine", 10)
    for user in range(5):
        for entity in ("x", "y", "z"):
            fold(user, kind=ROUTINE_KIND, entity_id=entity)
        fold(user, kind=BACKGROUND_KIND, entity_id="b")
    assert run_flush("test") == 5
    assert all("routine" not in claim for claim in claims)
    assert redis_client.zcard(keys.pending()) == 5 * 3

    redis_client.delete("routine")
    assert run_flush("test") == 5
    digests = published(redis_client, "routine")
    assert sorted(m["user_id"] for m in digests) == list(range(5))
    assert all(len(m["digest"]["items"]) == 3 for m in digests)
    assert redis_client.zcard(keys.pending()) == 0
    assert not redis_client.exists(keys.flush_backlog())


def test_a_user_with_more_keys_than_the_room_still_goes_whole(redis_client, settings, claims):
    # Room for 2, a user with 5 keys: claimed whole as the class's first user (one digest), never left for ever.
    settings.SLUICE_QUEUES = {"routine": {"capacity": 3}}
    fill(redis_client, "routine", 1)
    for entity in "abcde":
        fold(1, kind=ROUTINE_KIND, entity_id=entity)
    fold(2, kind=ROUTINE_KIND, entity_id="a")
    assert run_flush("test") == 2
    assert claims[0] == {"routine": 5}  # user 1 whole; user 2's key did not fit the room left
    unfill(redis_client, "routine", 1)
    messages = published(redis_client, "routine")
    sizes = sorted((m["user_id"], len(m["digest"]["items"]) if "digest" in m else 1) for m in messages)
    assert sizes == [(1, 5), (2, 1)]
