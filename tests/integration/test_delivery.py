"""End to end with a real Celery worker: each class is delivered once, through the locmem backend."""

import pytest
from celery.contrib.testing.worker import start_worker

from notifications import notify
from notifications.delivery.tasks import send_tasks
from notifications.kinds import get_kind
from notifications.policy import publish_event
from pipeline.admission.event import Event
from pipeline.celery import app
from tests.waiting import settled, wait_for


@pytest.fixture
def worker(redis_client, locmem_channels):
    with start_worker(
        app,
        pool="threads",
        concurrency=4,
        perform_ping_check=False,
        queues=["critical", "routine", "background"],
        loglevel="WARNING",
        shutdown_timeout=30,
    ):
        yield locmem_channels


@pytest.mark.parametrize(
    ("kind", "klass", "channels"),
    [
        ("meeting.reminder", "critical", {"push", "email"}),
        ("task.assigned", "routine", {"email", "push"}),
        ("meeting.participant_left", "background", {"push"}),
    ],
)
def test_each_class_is_delivered_on_each_channel(worker, user, kind, klass, channels):
    notify(user, kind, entity_id="m-7", payload={"title": "Weekly sync"})
    wait_for(lambda: len(worker) == len(channels))
    wait_for(lambda: settled(klass), what="the send acked")
    assert {m.channel for m in worker} == channels
    message = worker[0]
    assert (message.kind, message.klass, message.user_id, message.entity_id) == (kind, klass, user.pk, "m-7")
    assert "Weekly sync" in message.subject
    assert len(worker) == len(channels)


def test_redelivered_message_is_not_sent_twice(worker, user):
    event = Event(get_kind("meeting.invitation"), "fixed-id-1", user.pk, "m-1", "{}")
    publish_event(event)
    wait_for(lambda: len(worker) == 1)
    publish_event(event)  # the same notification id again, as a redelivery would bring it
    notify(user, "meeting.invitation", entity_id="m-2")
    wait_for(lambda: len(worker) == 2)
    wait_for(lambda: settled("critical", "routine", "background"), what="every message acked")
    assert sorted(m.entity_id for m in worker) == ["m-1", "m-2"]


def test_send_task_per_class_acks_late_and_only_critical_requeues_on_worker_loss():
    assert all(task.acks_late for task in send_tasks.values())
    assert send_tasks["critical"].reject_on_worker_lost
    assert not send_tasks["routine"].reject_on_worker_lost
