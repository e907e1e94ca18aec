"""Issue 35: the escalation drain never holds a pool. Beat's tick only asks each class for a step, on that class's own
pool; a step works within its budget, one batch at a time (one query for the items, one round trip for their
admissions, one UPDATE), and asks for the next; and the user's every-kind or category choices for the escalation's
channels hold."""

import base64
import json
import time

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from notifications import preferences
from notifications.inbox import escalation, tasks
from notifications.inbox.channel import InboxChannel
from notifications.inbox.models import InboxItem
from pipeline import housekeeping
from pipeline.redis import keys
from tests import inbox_helpers
from tests.inbox_helpers import INBOX_KINDS, inbox_message

inbox_settings = inbox_helpers.inbox_settings  # the fixture, found by its name
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(60)]
LATER = 10_000  # seconds: past every kind's after_s
KINDS = {
    **INBOX_KINDS,
    "doc.flagged": {
        "class": "routine",
        "channels": ["inbox"],
        "category": "docs",
        "escalate": {"after_s": 900, "channels": ["email"]},
    },
    "alarm.raised": {"class": "critical", "channels": ["inbox"], "escalate": {"after_s": 60, "channels": ["sms"]}},
}


@pytest.fixture
def kinds(inbox_settings, settings):
    settings.SLUICE_KINDS = KINDS
    return inbox_settings


def unread_items(user, n, kind="doc.changed"):
    channel = InboxChannel("inbox")
    for i in range(n):
        channel.send(inbox_message(user.pk, kind=kind, entity_id=f"d{i}", payload={"title": f"Doc {i}"}))
    return list(InboxItem.objects.filter(user=user, kind=kind).order_by("pk"))


def queued_tasks(redis_client, queue):
    return [json.loads(raw)["headers"]["task"] for raw in redis_client.lrange(queue, 0, -1)]


def test_beats_tick_asks_each_class_for_one_step_on_its_own_pool(kinds, redis_client):
    assert tasks.escalate() == ["critical", "routine"]
    assert tasks.escalate() == []  # a step of each waits in its queue already: none queued twice
    assert queued_tasks(redis_client, "routine") == ["sluice.inbox.escalate_step"]
    assert queued_tasks(redis_client, "critical") == ["sluice.inbox.escalate_step"]
    [raw] = redis_client.lrange("routine", 0, -1)
    _args, kwargs, _embed = json.loads(base64.b64decode(json.loads(raw)["body"]))
    assert kwargs == {"klass": "routine"}


def test_a_step_stops_at_its_budget_after_one_batch_and_asks_for_the_next(kinds, user, redis_client, monkeypatch):
    unread_items(user, 120)
    step = housekeeping.Step("sluice.inbox.escalate_step", "routine", budget_s=0)
    totals = escalation.drain_class("routine", batch=50, now=time.time() + LATER, step=step)
    assert totals == {"sent": 50, "cancelled": 0, "waiting": 0}
    assert step.more
    assert redis_client.zcard(keys.inbox_escalations("routine")) == 70

    # The task's step: one batch within a tiny budget, and the next step asked for at the back of routine's queue.
    monkeypatch.setattr(housekeeping, "STEP_BUDGET_S", 0)
    monkeypatch.setattr(escalation, "BATCH", 50)
    redis_client.zadd(
        keys.inbox_escalations("routine"), {m: 0 for m in redis_client.zrange(keys.inbox_escalations("routine"), 0, -1)}
    )
    assert tasks.escalate_step("routine") == {"sent": 50, "cancelled": 0, "waiting": 0}
    # Behind the 50 escalations it sent: the queue's head (LPUSH) is the end workers take from last.
    assert queued_tasks(redis_client, "routine")[0] == "sluice.inbox.escalate_step"
    assert housekeeping.behind(redis_client)[("sluice.inbox.escalate_step", "routine")] >= 0


def test_a_step_that_finds_another_running_does_nothing(kinds, user, redis_client):
    unread_items(user, 3)
    with housekeeping.step("sluice.inbox.escalate_step", "routine", redis_client) as running:
        assert running is not None
        assert tasks.escalate_step("routine") is None
    assert redis_client.zcard(keys.inbox_escalations("routine")) == 3


def test_a_batch_is_one_query_for_its_items_and_one_update_for_those_escalated(kinds, user, redis_client):
    unread_items(user, 60)
    with CaptureQueriesContext(connection) as queries:
        totals = escalation.drain_class("routine", batch=200, now=time.time() + LATER)
    assert totals == {"sent": 60, "cancelled": 0, "waiting": 0}
    assert len(queries) <= 3, [q["sql"] for q in queries]  # before: an UPDATE per item
    assert InboxItem.objects.filter(escalated_at__isnull=False).count() == 60


@pytest.mark.parametrize(
    ("scope", "kind"),
    [({"channel": "email"}, "doc.changed"), ({"category": "docs", "channel": "email"}, "doc.flagged")],
    ids=["every kind", "the category"],
)
def test_email_off_for_every_kind_or_the_category_cancels_an_email_escalation(kinds, user, redis_client, scope, kind):
    preferences.set(user, mode="off", **scope)
    unread_items(user, 1, kind=kind)
    assert escalation.drain(now=time.time() + LATER) == {"sent": 0, "cancelled": 1, "waiting": 0}
    assert kinds == []  # no email
    assert preferences.get(user)["effective"][kind]["escalation"] == {"instant": [], "digest": [], "off": ["email"]}


def test_email_as_a_digest_for_every_kind_folds_the_escalation(kinds, user, redis_client):
    preferences.set(user, mode="digest", channel="email")
    unread_items(user, 1)
    assert escalation.drain(now=time.time() + LATER)["sent"] == 1
    assert redis_client.zcard(keys.pending()) == 1  # in their next digest, not at once
    assert preferences.get(user)["effective"]["doc.changed"]["escalation"] == {
        "instant": [],
        "digest": ["email"],
        "off": [],
    }
