"""Opt-out end to end with a real worker: an opted-out user's events all arrive one by one, never as a digest."""

import time

import pytest
from celery.contrib.testing.worker import start_worker

from digest.flush import drain_overflows, run_flush
from notifications import Outcome, notify
from notifications.models import DigestPreference
from pipeline import keys
from pipeline.celery import app
from tests.conftest import wait_for


@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(90)
def test_opted_out_user_gets_every_event_and_others_get_a_digest(
    redis_client, locmem_channels, settings, django_user_model
):
    settings.SLUICE_QUEUES = {"routine": {"capacity": 1, "overflow": 10}}
    alice = django_user_model.objects.create_user("alice", email="a@example.com")
    bob = django_user_model.objects.create_user("bob", email="b@example.com")
    DigestPreference.objects.create(user=alice)  # deliver every event separately, all kinds
    assert redis_client.sismember(keys.optout(), str(alice.pk))

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
        assert wait_for(
            lambda: (
                drain_overflows() == 0
                and redis_client.llen(keys.overflow("routine")) == 0
                and len({m.id for m in locmem_channels}) == 6
            )
        )
        time.sleep(0.2)
    to_alice = [m for m in locmem_channels if m.user_id == alice.pk]
    to_bob = [m for m in locmem_channels if m.user_id == bob.pk]
    assert sorted(m.payload["i"] for m in to_alice) == [0, 1, 2, 3, 4]
    assert all(m.count == 1 for m in to_alice)
    assert [(m.count, m.subject) for m in to_bob] == [(5, "5 new comments in task «t1»")]


@pytest.mark.django_db(transaction=True)
def test_preferences_mirror_to_redis_on_save_delete_and_bulk_actions(redis_client, django_user_model):
    user = django_user_model.objects.create_user("carol")
    pref = DigestPreference.objects.create(user=user, kind="task.comment")
    assert redis_client.smembers(keys.optout()) == {f"{user.pk}|task.comment".encode()}
    pref.deliver_separately = False
    pref.save()
    assert redis_client.scard(keys.optout()) == 0
    pref.delete()
    DigestPreference.objects.create(user=user)
    redis_client.delete(keys.optout())  # drift, as after a Redis restart without persistence
    run_flush("test")  # every flush heals the mirror from the database
    assert redis_client.smembers(keys.optout()) == {str(user.pk).encode()}
