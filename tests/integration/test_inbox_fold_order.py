"""Through a real worker, the inbox keeps the newest event's payload by when each event happened (its first
publish, which a retry keeps), whatever order the sends land in."""

import json

import pytest
from celery.contrib.testing.worker import start_worker

from notifications.inbox.models import InboxItem
from pipeline.broker.message import envelope
from pipeline.celery import app
from tests import inbox_helpers
from tests.waiting import settled, wait_for

inbox_settings = inbox_helpers.inbox_settings  # the fixture, found by its name
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def worker(inbox_settings):
    with start_worker(
        app,
        pool="threads",
        concurrency=1,  # one at a time, in the order they were queued
        perform_ping_check=False,
        queues=["routine"],
        loglevel="WARNING",
        shutdown_timeout=30,
    ):
        yield inbox_settings


def queued(user, nid, title, published_at, retries=0):
    kwargs = {"notification_id": nid, "kind": "doc.changed", "user_id": user.pk, "entity_id": "budget"}
    body = json.dumps({**kwargs, "payload": {"title": title}})
    return envelope("sluice.send.routine", nid, body, "routine", "{}", published_at=published_at, retries=retries)


def test_an_older_event_retried_after_a_newer_one_leaves_the_newer_text(worker, user, redis_client):
    # The newer event (published at t=2000) is sent first; the older one's retry (it keeps its first publish, t=1000)
    # comes after it.
    redis_client.lpush("routine", queued(user, "n-new", "Budget v2", 2000.0))
    redis_client.lpush("routine", queued(user, "n-old", "Budget v1", 1000.0, retries=1))
    wait_for(lambda: settled("routine") and InboxItem.objects.filter(count=2).exists(), what="both sends written")
    item = InboxItem.objects.get(user=user)
    assert item.payload == {"title": "Budget v2"}
    assert item.title == "2 updates on Budget v2"
    assert item.happened_at.timestamp() == 2000.0
