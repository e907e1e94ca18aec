"""Issue 30: an escalation is admitted as any event of its kind for its user. Email taken as a digest: it rides in
their digest at the tick, not on its own; instant: it goes at once; quiet hours hold it; and it is admitted once,
whoever drains it."""

import json
import time
from datetime import UTC, datetime, timedelta

import pytest
from celery.contrib.testing.worker import start_worker

from digest.flush import run_flush
from notifications import preferences
from notifications.inbox import escalation
from notifications.inbox.channel import InboxChannel
from notifications.inbox.models import InboxItem
from pipeline.celery import app
from pipeline.metrics import read_counters
from pipeline.redis import keys
from tests import inbox_helpers
from tests.digest_helpers import published
from tests.inbox_helpers import INBOX_KINDS, inbox_message
from tests.waiting import settled, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(60)]
AFTER_S = 900
KIND = "doc.reviewed"  # to the inbox and by email; an unread item escalates by email
KINDS = {
    **INBOX_KINDS,
    KIND: {"class": "routine", "channels": ["inbox", "email"], "escalate": {"after_s": AFTER_S, "channels": ["email"]}},
}


@pytest.fixture
def escalating(inbox_helpers_settings, settings):
    settings.SLUICE_KINDS = KINDS
    return inbox_helpers_settings


inbox_helpers_settings = inbox_helpers.inbox_settings  # the fixture, found by its name


@pytest.fixture
def worker(escalating):
    with start_worker(
        app,
        pool="threads",
        concurrency=2,
        perform_ping_check=False,
        queues=["routine"],
        loglevel="WARNING",
        shutdown_timeout=30,
    ):
        yield escalating


def unread_item(user, kind=KIND, entity_id="r1"):
    InboxChannel("inbox").send(inbox_message(user.pk, kind=kind, entity_id=entity_id))
    return InboxItem.objects.get(user=user, kind=kind, entity_id=entity_id)


def member(user, kind=KIND, entity_id="r1"):
    return keys.fold_member(user.pk, kind, entity_id)


def due_now(redis_client):
    """The held folds' time comes (a cadence's tick, the end of quiet hours): waiting for it is not a test."""
    redis_client.zadd(keys.pending(), dict.fromkeys(redis_client.zrange(keys.pending(), 0, -1), time.time()), xx=True)


def test_a_user_taking_email_as_a_daily_digest_gets_the_escalation_in_it_at_the_tick(worker, user, redis_client):
    preferences.set(user, mode="digest", kind=KIND, channel="email")
    preferences.set_cadence(user, "daily", "08:30")
    # The next tick a minute away (as tests/system/test_user_digest_at_tick.py does), and no rebuild of the
    # mirror puts the real one back meanwhile.
    redis_client.hset(keys.preferences(user.pk), "c", str(int(time.time() + 60)))
    redis_client.set(keys.preferences_rebuilt(), 1)
    item = unread_item(user)

    assert escalation.drain(now=time.time() + AFTER_S + 1) == {"sent": 1, "cancelled": 0, "waiting": 0}
    run_flush("test")
    wait_for(lambda: settled("routine"), what="nothing left to send")
    assert list(worker) == [], "the escalation went out on its own, not in the digest"
    fold = redis_client.hgetall(keys.fold(member(user)))
    assert (fold[b"c:email"], fold[b"r"]) == (b"1", b"preference")

    due_now(redis_client)
    wait_for(lambda: run_flush("test") is not None and len(worker) == 1, what="the digest at the tick")
    wait_for(lambda: settled("routine"), what="the digest sent")
    [email] = worker
    assert (email.channel, email.user_id, email.entity_id) == ("email", user.pk, "r1")
    assert email.id.startswith("digest-")  # inside the user's digest, not the escalation's own send
    item.refresh_from_db()
    assert item.escalated_at is not None
    assert read_counters(redis_client)["inbox_escalations:routine:sent"] == 1


def test_an_instant_user_gets_the_escalation_at_once_on_its_channels_only(worker, user, redis_client):
    preferences.set(user, mode="instant", kind=KIND, channel="email")
    item = unread_item(user)
    assert escalation.drain(now=time.time() + AFTER_S + 1)["sent"] == 1
    wait_for(lambda: len(worker) == 1, what="the escalation email, at once")
    wait_for(lambda: settled("routine"), what="the escalation sent")
    [email] = worker
    assert (email.channel, email.id) == ("email", escalation.notification_id(item.pk))  # not the inbox again
    assert InboxItem.objects.filter(user=user).count() == 1
    assert not redis_client.zcard(keys.pending())


def quiet_now(user):
    now = datetime.now(UTC)
    start, end = (now - timedelta(hours=1)).strftime("%H:%M"), (now + timedelta(hours=1)).strftime("%H:%M")
    preferences.set_quiet_hours(user, "UTC", start, end)


def test_quiet_hours_hold_the_escalation_until_they_end(escalating, user, redis_client):
    quiet_now(user)
    preferences.set(user, mode="instant", kind=KIND, channel="email")
    unread_item(user)
    assert escalation.drain(now=time.time() + AFTER_S + 1)["sent"] == 1
    assert redis_client.llen("routine") == 0  # held, not sent
    assert redis_client.hget(keys.fold(member(user)), "r") == b"quiet"
    assert redis_client.zscore(keys.pending(), member(user)) > time.time() + 30 * 60  # until the quiet hours end
    run_flush("test")
    assert redis_client.llen("routine") == 0

    due_now(redis_client)  # the quiet hours end
    run_flush("test")
    [message] = published(redis_client)
    assert (message["user_id"], message["entity_id"], message["kind"]) == (user.pk, "r1", KIND)
    assert message["channels"] == ["email"]


def test_an_escalation_admitted_once_is_not_folded_again_by_a_takeover(escalating, user, redis_client):
    preferences.set(user, mode="digest", kind=KIND, channel="email")
    item = unread_item(user)
    assert escalation.escalate("routine", item.pk, item) == "sent"
    # A drainer that admitted it died before recording it: the next one takes the item over.
    InboxItem.objects.filter(pk=item.pk).update(escalated_at=None)
    item.refresh_from_db()
    assert escalation.escalate("routine", item.pk, item) == "sent"
    assert redis_client.hget(keys.fold(member(user)), "n") == b"1"  # folded once
    item.refresh_from_db()
    assert item.escalated_at is not None


def test_a_channel_outside_the_kind_follows_the_users_digest_for_the_kind(escalating, user, redis_client):
    # doc.changed goes only to the inbox and escalates by email, which the user cannot choose for it: a user who
    # takes the kind as a digest gets the escalation in their digest; the kind's default (instant) sends it.
    preferences.set(user, mode="digest", kind="doc.changed")
    item = unread_item(user, kind="doc.changed", entity_id="d1")
    assert escalation.escalate("routine", item.pk, item) == "sent"
    assert redis_client.llen("routine") == 0
    fold = redis_client.hgetall(keys.fold(member(user, "doc.changed", "d1")))
    assert (fold[b"c:email"], fold.get(b"c:inbox")) == (b"1", None)

    other = type(user).objects.create_user("bo", email="bo@example.com")
    item = unread_item(other, kind="doc.changed", entity_id="d1")
    assert escalation.escalate("routine", item.pk, item) == "sent"
    [message] = [json.loads(m) for m in redis_client.lrange("routine", 0, -1)]
    assert message["headers"]["sluice_channels"] == ["email"]
