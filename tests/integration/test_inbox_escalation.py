"""Escalation with a real worker: an inbox item still unread after its kind's after_s is emailed once, through the
ordinary send path; a read one never is; a drainer that died mid-drain loses and doubles nothing."""

import time

import pytest
from celery.contrib.testing.worker import start_worker
from django.utils import timezone

from notifications.inbox import escalation, unread
from notifications.inbox.channel import InboxChannel
from notifications.inbox.models import InboxItem
from pipeline.celery import app
from pipeline.metrics import read_counters
from pipeline.redis import keys
from tests import inbox_helpers
from tests.inbox_helpers import inbox_message
from tests.waiting import settled, wait_for

inbox_settings = inbox_helpers.inbox_settings  # the fixture, found by its name
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]
AFTER_S = 900  # doc.changed's escalate after_s (tests/inbox_helpers.py)


@pytest.fixture
def worker(inbox_settings):
    with start_worker(
        app,
        pool="threads",
        concurrency=4,
        perform_ping_check=False,
        queues=["routine"],
        loglevel="WARNING",
        shutdown_timeout=30,
    ):
        yield inbox_settings


def items_for(user, n):
    channel = InboxChannel("inbox")
    for i in range(n):
        channel.send(inbox_message(user.pk, entity_id=f"d{i}", payload={"title": f"Doc {i}"}))
    return list(InboxItem.objects.filter(user=user).order_by("pk"))


def test_unread_items_are_emailed_exactly_once_and_read_ones_never(worker, user, redis_client):
    # 20 items, 12 read before after_s, 8 not (the system tier's test_inbox_escalation_kill.py runs 100: 60 and 40).
    items = items_for(user, 20)
    InboxItem.objects.filter(pk__in=[item.pk for item in items[:12]]).update(read_at=timezone.now())
    unread.refresh(user.pk)
    assert escalation.drain(now=time.time() + 10) == {"sent": 0, "cancelled": 0, "waiting": 0}  # not due yet

    later = time.time() + AFTER_S + 1
    assert escalation.drain(now=later) == {"sent": 8, "cancelled": 12, "waiting": 0}
    wait_for(lambda: len(worker) >= 8, what=lambda: f"8 escalation emails, got {len(worker)}")
    wait_for(lambda: settled("routine"), what="every escalation acked")
    assert escalation.drain(now=later + AFTER_S) == {"sent": 0, "cancelled": 0, "waiting": 0}
    assert len(worker) == 8
    assert {m.channel for m in worker} == {"email"}
    assert sorted(m.entity_id for m in worker) == sorted(item.entity_id for item in items[12:])
    assert len({m.id for m in worker}) == 8
    assert InboxItem.objects.filter(escalated_at__isnull=False).count() == 8
    counters = read_counters(redis_client)
    assert counters["inbox_escalations:routine:sent"] == 8
    assert counters["inbox_escalations:routine:cancelled"] == 12


def test_a_drainer_killed_mid_drain_loses_and_doubles_nothing(worker, user, redis_client):
    items = items_for(user, 10)
    later = time.time() + AFTER_S + 1
    # A drainer took every due item, published the first three's escalations, marked only the first escalated, and
    # was killed: its claims stay in the claimed set until its lease runs out.
    taken = escalation.engine_scripts("claim_due", on=redis_client)(
        keys=[keys.inbox_escalations("routine"), keys.inbox_escalating("routine")], args=[later, 60, 100]
    )
    assert len(taken) == 10
    for item in items[:3]:
        assert escalation.escalate("routine", item.pk, item) == "sent"
    InboxItem.objects.filter(pk__in=[item.pk for item in items[1:3]]).update(escalated_at=None)  # died before these
    assert escalation.drain(now=later) == {"sent": 0, "cancelled": 0, "waiting": 0}  # its lease still holds
    wait_for(lambda: len(worker) >= 3 and settled("routine"), what="the dead drainer's three escalations sent")

    # Its lease ran out: the next drain takes the ten over, publishing items 1 and 2 again under the same ids.
    assert escalation.drain(now=later + 61)["sent"] == 10
    wait_for(lambda: len(worker) >= 10, what=lambda: f"10 escalation emails, got {len(worker)}")
    wait_for(lambda: settled("routine"), what="every escalation acked, the two duplicates skipped")
    assert sorted(m.entity_id for m in worker) == sorted(item.entity_id for item in items)
    assert redis_client.zcard(keys.inbox_escalating("routine")) == 0
    assert redis_client.zcard(keys.inbox_escalations("routine")) == 0
