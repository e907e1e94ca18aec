"""10,000 events on 50 entities for one user, through notify(), admission, the digest and a real worker into the
inbox: at most 50 unread rows, their counts adding up to 10,000; and a user past max_items keeps the bound."""

import pytest
from celery.contrib.testing.worker import start_worker
from django.db import OperationalError
from django.db.models import Sum

from digest.flush import run_flush
from notifications import notify
from notifications.inbox import unread
from notifications.inbox.models import InboxItem
from pipeline.celery import app
from pipeline.redis import keys
from tests.inbox_helpers import inbox_settings  # noqa: F401 - the fixture
from tests.waiting import settled, wait_for

EVENTS = 10_000
ENTITIES = 50


def counted(user):
    """The events in the user's inbox; None while the worker holds the table (the tests' in-memory SQLite locks whole
    tables, and answers at once rather than waiting)."""
    try:
        return InboxItem.objects.filter(user=user).aggregate(total=Sum("count"))["total"] or 0
    except OperationalError:
        return None


@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(600)
def test_ten_thousand_events_on_fifty_entities_fold_into_fifty_rows(
    inbox_settings, user, settings, redis_client, django_user_model
):
    settings.SLUICE_QUEUES = {"routine": {"capacity": 20}}  # most events fold into the digest, as under a flood
    for i in range(EVENTS):
        notify(user, "doc.changed", entity_id=f"doc-{i % ENTITIES}", payload={"title": f"Doc {i % ENTITIES}", "i": i})
    with start_worker(
        app,
        pool="threads",
        concurrency=1,  # one writer: the in-memory SQLite of the tests locks the whole table per write
        perform_ping_check=False,
        queues=["routine"],
        loglevel="WARNING",
        shutdown_timeout=30,
    ):

        def all_in():
            if redis_client.zcard(keys.pending()):
                run_flush("test")
            return counted(user) == EVENTS and settled("routine")

        wait_for(all_in, timeout=300, what=lambda: f"{EVENTS} events in the inbox, {counted(user)} so far")

        rows = InboxItem.objects.filter(user=user)
        assert rows.count() <= ENTITIES
        assert rows.filter(read_at__isnull=True).count() == ENTITIES
        assert counted(user) == EVENTS
        assert unread.read(user.pk)[0] == ENTITIES

        # A user past max_items keeps the bound: 50 entities into an inbox of 30.
        settings.SLUICE_INBOX = {"max_items": 30}
        other = django_user_model.objects.create_user("bob", email="bob@example.com")
        for i in range(ENTITIES):
            notify(other, "doc.changed", entity_id=f"doc-{i}", payload={"title": f"Doc {i}"})

        def bounded():
            if redis_client.zcard(keys.pending()):
                run_flush("test")
            return settled("routine") and not redis_client.zcard(keys.pending())

        wait_for(bounded, timeout=120, what="bob's events sent")
        assert InboxItem.objects.filter(user=other).count() == 30
        assert unread.read(other.pk)[0] == 30
