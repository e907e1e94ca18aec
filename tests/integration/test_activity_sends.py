"""Issue 40: the worker writes a send's end to the activity log with the end itself: sent (channel, provider's id),
retried (the error), dead-lettered (the reason); the entries carry the admitted event's notification id."""

import pytest
from celery.contrib.testing.worker import start_worker

from notifications import notify
from notifications.activity import tasks
from notifications.activity.models import ActivityEntry
from notifications.activity.words import Words
from pipeline import activity_fields
from pipeline.broker import deadletters
from pipeline.celery import app
from pipeline.redis import keys
from tests import scripted
from tests.waiting import wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(60)]


@pytest.fixture
def worker(redis_client, settings, monkeypatch):
    """An in-process worker on every queue, one slot, scripted channels, retries without waiting."""
    settings.SLUICE_CHANNELS = {
        name: {"backend": "tests.scripted.ScriptedChannel"} for name in ("email", "sms", "push")
    }
    monkeypatch.setattr("pipeline.sending.endings.MAX_BACKOFF_S", 0)
    scripted.reset()
    with start_worker(
        app,
        pool="threads",
        concurrency=1,
        perform_ping_check=False,
        queues=["critical", "routine", "background"],
        loglevel="WARNING",
        shutdown_timeout=30,
    ):
        yield scripted
    scripted.reset()


def entries(client):
    return [activity_fields.decode(fields) for _id, fields in client.xrange(keys.activity())]


def steps(client):
    return [(e.outcome, e.channel, e.reason) for e in entries(client)]


def test_a_sent_message_is_its_admission_then_one_sent_entry_per_channel(worker, user, redis_client):
    notify(user, "meeting.reminder", entity_id="m-1", payload={"title": "Daily"})
    wait_for(lambda: len(entries(redis_client)) == 3, what="admission's entry and both channels' ends")
    accepted, *sent = entries(redis_client)
    assert (accepted.outcome, accepted.title) == ("accepted", "Daily")
    assert sorted((e.outcome, e.channel) for e in sent) == [("sent", "email"), ("sent", "push")]
    assert {e.notification for e in sent} == {accepted.notification}
    assert {(e.user, e.kind, e.entity, e.klass) for e in sent} == {
        (str(user.pk), "meeting.reminder", "m-1", "critical")
    }


@pytest.mark.expected_errors
def test_retries_then_the_dead_letters_are_entries_with_their_error_and_reason(worker, user, redis_client):
    worker.plan["email"] = ["transient"] * 6
    notify(user, "meeting.invitation", entity_id="m-1")
    wait_for(lambda: deadletters.size() == 1)
    wait_for(lambda: entries(redis_client)[-1].outcome == "dead_lettered", what="the dead letter's entry")
    log = steps(redis_client)
    assert log == [("accepted", "", "")] + [("retried", "email", "TransientSendError")] * 5 + [
        ("dead_lettered", "email", "retries_exhausted")
    ]
    assert "email is down for now" in entries(redis_client)[1].detail


def test_a_permanent_refusal_is_dead_lettered_for_its_channel(worker, user, redis_client):
    worker.plan["push"] = ["permanent"]
    notify(user, "meeting.reminder", entity_id="m-1")
    wait_for(lambda: len(entries(redis_client)) == 3, what="admission's entry and both channels' ends")
    assert sorted(steps(redis_client)) == [
        ("accepted", "", ""),
        ("dead_lettered", "push", "permanent"),
        ("sent", "email", ""),
    ]


def test_a_send_that_failed_over_names_the_providers_that_failed_it(worker, user, redis_client, settings):
    scripted_backend = {"backend": "tests.scripted.ScriptedChannel"}
    settings.SLUICE_CHANNELS = {
        **settings.SLUICE_CHANNELS,
        "email": {"providers": [{"name": "a", **scripted_backend}, {"name": "b", **scripted_backend}]},
    }
    worker.plan["email"] = ["transient"]
    notify(user, "meeting.invitation", entity_id="m-1")
    wait_for(lambda: any(e.outcome == "sent" for e in entries(redis_client)), what="the send's entry")
    [sent] = [e for e in entries(redis_client) if e.outcome == "sent"]
    assert (sent.channel, sent.provider, sent.reason) == ("email", "b", "failover:a")
    tasks.drain()
    row = ActivityEntry.objects.get(outcome="sent")
    assert str(Words(user).say(row)) == "Sent by email through b, failed over from a"
