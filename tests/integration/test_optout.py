"""A user who chose instant delivery, end to end with a real worker: every event arrives one by one, never as a
digest, even when the queue is full; and the preferences' Redis mirror follows the database."""

import pytest
from celery.contrib.testing.worker import start_worker

from digest.flush import drain_overflows, run_flush
from notifications import Outcome, notify, preferences
from notifications.models import Preference
from pipeline.celery import app
from pipeline.redis import keys
from tests.waiting import settled, wait_for


@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(90)
def test_a_user_who_chose_instant_gets_every_event_and_others_get_a_digest(
    redis_client, locmem_channels, settings, django_user_model
):
    settings.SLUICE_QUEUES = {"routine": {"capacity": 1, "overflow": 10}}
    alice = django_user_model.objects.create_user("alice", email="a@example.com")
    bob = django_user_model.objects.create_user("bob", email="b@example.com")
    preferences.set(alice, mode="instant")  # every event on its own, every kind
    assert redis_client.hget(keys.preferences(alice.pk), "k:task.comment") == b"email||1"

    redis_client.lpush("routine", "occupied")  # the queue is full before the burst starts
    alice_outcomes = {notify(alice, "task.comment", entity_id="t1", payload={"i": i}) for i in range(5)}
    bob_outcomes = {notify(bob, "task.comment", entity_id="t1", payload={"i": i}) for i in range(5)}
    assert alice_outcomes == {Outcome.DEFERRED}
    assert bob_outcomes == {Outcome.FOLDED}
    redis_client.delete("routine")

    with start_worker(
        app,
        pool="threads",
        concurrency=2,
        perform_ping_check=False,
        queues=["routine"],
        loglevel="WARNING",
        shutdown_timeout=30,
    ):
        assert run_flush("test") == 1  # bob's digest; alice's events go one by one as room frees
        wait_for(
            lambda: (
                drain_overflows() == 0
                and redis_client.llen(keys.overflow("routine")) == 0
                and len({m.id for m in locmem_channels}) == 6
            )
        )
        wait_for(lambda: settled("routine"), what="every send acked")
    to_alice = [m for m in locmem_channels if m.user_id == alice.pk]
    to_bob = [m for m in locmem_channels if m.user_id == bob.pk]
    assert sorted(m.payload["i"] for m in to_alice) == [0, 1, 2, 3, 4]
    assert all(m.count == 1 for m in to_alice)
    assert [(m.count, m.subject) for m in to_bob] == [(5, "5 new comments in task «t1»")]


@pytest.mark.django_db(transaction=True)
def test_the_mirror_follows_saves_deletes_and_heals_at_a_flush(redis_client, django_user_model):
    user = django_user_model.objects.create_user("carol")
    key = keys.preferences(user.pk)
    row = preferences.set(user, kind="task.comment", mode="off")
    assert redis_client.hget(key, "k:task.comment") == b"||0"
    assert redis_client.hget(key, "k:task.assigned") == b"email,push||0"  # untouched: the kind's default
    row.mode = "digest"
    row.save()
    assert redis_client.hget(key, "k:task.comment") == b"|email|0"
    row.delete()
    assert not redis_client.exists(key)  # no choice left: admission uses the kinds' defaults
    Preference.objects.create(user=user, mode="instant")
    redis_client.delete(key, keys.preferences_rebuilt())  # drift, as after a Redis restart without persistence
    run_flush("test")  # a flush rebuilds the mirror from the database (at most once an hour)
    assert redis_client.hget(key, "k:task.comment") == b"email||1"
