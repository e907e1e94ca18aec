"""An event the inbox's database refuses (a DataError: a NUL character on PostgreSQL) is a permanent failure of the
inbox channel: dead-lettered at once with the reason inbox_unstorable, never retried six times; the kind's other
channels still send. notify() refuses a NUL up front, but a message queued before that, or a dead letter replayed,
still reaches the inbox's write."""

import json
import sqlite3
import uuid

import pytest
from celery.contrib.testing.worker import start_worker
from django.db import connection
from django.db.backends.signals import connection_created

from notifications.channels.base import PermanentSendError
from notifications.inbox.channel import InboxChannel
from notifications.inbox.fold import Unstorable
from notifications.inbox.models import InboxItem
from pipeline.broker import deadletters
from pipeline.broker.message import envelope
from pipeline.celery import app
from tests import inbox_helpers
from tests.inbox_helpers import inbox_message
from tests.waiting import settled, wait_for

inbox_settings = inbox_helpers.inbox_settings  # the fixture, found by its name
pytestmark = pytest.mark.django_db(transaction=True)

# SQLite stores a NUL; a row over its length limit is its DataError ("string or blob too big").
SQLITE_ROW_LIMIT = 1200


def _limit(wrapper):
    wrapper.connection.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, SQLITE_ROW_LIMIT)


@pytest.fixture
def unstorable(user):
    """A payload the test database refuses with a DataError: a NUL character in a string on PostgreSQL (its text
    and jsonb refuse it); on SQLite, a row longer than a length limit set on every connection for the test."""
    if connection.vendor == "postgresql":
        yield {"title": "Doc", "text": "a\u0000b"}
        return
    connection.ensure_connection()
    _limit(connection)

    def on_new(sender, connection, **kwargs):
        if connection.vendor == "sqlite":
            _limit(connection)

    connection_created.connect(on_new)
    yield {"title": "Doc", "text": "x" * (2 * SQLITE_ROW_LIMIT)}
    connection_created.disconnect(on_new)
    connection.connection.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, 1_000_000_000)


def test_a_data_error_of_the_inbox_write_is_permanent_and_names_it(inbox_settings, user, unstorable):
    with pytest.raises(PermanentSendError) as raised:
        InboxChannel("inbox").send(inbox_message(user.pk, payload=unstorable))
    assert isinstance(raised.value, Unstorable)
    assert raised.value.reason == "inbox_unstorable"
    assert "DataError" in str(raised.value)
    assert not InboxItem.objects.exists()


@pytest.fixture
def worker(inbox_settings, monkeypatch):
    monkeypatch.setattr("pipeline.sending.endings.MAX_BACKOFF_S", 0)  # the old code's six tries, without waiting
    with start_worker(
        app,
        pool="threads",
        concurrency=1,
        perform_ping_check=False,
        queues=["routine"],
        loglevel="WARNING",
        shutdown_timeout=30,
    ):
        yield inbox_settings


def test_a_queued_event_the_inbox_cannot_store_is_dead_lettered_at_once(worker, user, unstorable, redis_client):
    nid = uuid.uuid4().hex
    kwargs = {"notification_id": nid, "kind": "doc.shared", "user_id": user.pk, "entity_id": "d1"}
    kwargs_json = json.dumps({**kwargs, "payload": unstorable})
    redis_client.lpush(
        "routine", envelope("sluice.send.routine", nid, kwargs_json, "routine", "{'kind': 'doc.shared'}")
    )
    wait_for(lambda: deadletters.size() == 1, what=lambda: f"one dead letter, {deadletters.entries()}")
    wait_for(lambda: settled("routine"), what="the message acked")
    [letter] = deadletters.entries()
    assert (letter.reason, letter.channels, letter.attempts) == ("inbox_unstorable", ["inbox"], 1)
    assert "DataError" in letter.error
    assert [(m.channel, m.id) for m in worker] == [("email", nid)]  # the kind's other channel still sent
    assert not InboxItem.objects.exists()
