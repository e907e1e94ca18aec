"""The inbox channel: a send writes an item, later events of the same user | kind | entity fold into it while it is
unread, each user's inbox keeps its bound, and the unread count in Redis follows every change."""

import pytest

from notifications.inbox import unread
from notifications.inbox.channel import InboxChannel
from notifications.inbox.models import InboxItem
from pipeline.metrics import read_counters
from pipeline.redis import keys
from tests import inbox_helpers
from tests.inbox_helpers import inbox_message

inbox_settings = inbox_helpers.inbox_settings  # the fixture, found by its name

pytestmark = pytest.mark.django_db(transaction=True)


def send(message):
    InboxChannel("inbox").send(message)


def test_events_of_one_entity_fold_into_one_unread_item(inbox_settings, user, redis_client):
    for i in range(20):
        send(inbox_message(user.pk, entity_id="q3", payload={"title": "Quarterly report", "i": i}))
    send(inbox_message(user.pk, entity_id="other"))
    items = {item.entity_id: item for item in InboxItem.objects.filter(user=user)}
    assert set(items) == {"q3", "other"}
    q3 = items["q3"]
    assert q3.count == 20
    assert q3.payload == {"title": "Quarterly report", "i": 19}  # the latest event's
    assert q3.title == "20 updates on Quarterly report"
    assert q3.url == "/docs/q3/"
    assert unread.read(user.pk)[0] == 2
    counters = read_counters(redis_client)
    assert counters["inbox_items:doc.changed:created"] == 2
    assert counters["inbox_items:doc.changed:folded"] == 19


def test_a_read_item_takes_no_more_folds_a_new_event_makes_a_new_row(inbox_settings, user):
    send(inbox_message(user.pk))
    InboxItem.objects.filter(user=user).update(read_at="2026-01-01T00:00:00Z")
    unread.refresh(user.pk)
    assert unread.read(user.pk)[0] == 0
    send(inbox_message(user.pk))
    assert sorted(InboxItem.objects.filter(user=user).values_list("count", flat=True)) == [1, 1]
    assert unread.read(user.pk)[0] == 1


def test_a_retried_send_folds_nothing_twice(inbox_settings, user):
    message = inbox_message(user.pk, count=3)
    send(inbox_message(user.pk))
    send(message)
    send(message)  # the engine retried it after its Redis part failed
    assert InboxItem.objects.get(user=user).count == 4


def test_a_user_past_max_items_keeps_the_bound_oldest_read_pruned_first(inbox_settings, user, settings):
    settings.SLUICE_INBOX = {"max_items": 5}
    for i in range(5):
        send(inbox_message(user.pk, entity_id=f"e{i}"))
    # e1 and e3 read: they go first, although e0 is older.
    InboxItem.objects.filter(user=user, entity_id__in=["e1", "e3"]).update(read_at="2026-01-01T00:00:00Z")
    send(inbox_message(user.pk, entity_id="e5"))
    send(inbox_message(user.pk, entity_id="e6"))
    assert sorted(InboxItem.objects.filter(user=user).values_list("entity_id", flat=True)) == [
        "e0",
        "e2",
        "e4",
        "e5",
        "e6",
    ]
    for i in range(7, 12):
        send(inbox_message(user.pk, entity_id=f"e{i}"))
    assert InboxItem.objects.filter(user=user).count() == 5  # past the read ones, the oldest unread go
    assert unread.read(user.pk)[0] == 5


def test_the_unread_count_is_counted_again_when_redis_lost_it(inbox_settings, user, redis_client):
    send(inbox_message(user.pk))
    redis_client.delete(keys.inbox_unread(user.pk))
    assert unread.read(user.pk)[0] == 1


def test_a_slower_writer_never_overwrites_a_later_count(inbox_settings, user, redis_client):
    key = keys.inbox_unread(user.pk)
    early = redis_client.hincrby(key, "g", 1)  # a writer that took its generation, then stalled
    send(inbox_message(user.pk))  # a later change writes its count (1) under a later generation
    unread.script("set_unread", on=redis_client)(keys=[key], args=[early, 0, 60])  # the stalled writer's stale 0
    assert unread.read(user.pk)[0] == 1


def test_items_untouched_past_retention_days_are_pruned_and_the_count_follows(inbox_settings, user, settings):
    from datetime import timedelta

    from django.utils import timezone

    from notifications.inbox.tasks import prune

    settings.SLUICE_INBOX = {"retention_days": 30}
    for entity in ("old", "new"):
        send(inbox_message(user.pk, entity_id=entity))
    InboxItem.objects.filter(entity_id="old").update(updated_at=timezone.now() - timedelta(days=31))
    assert prune() == 1
    assert list(InboxItem.objects.values_list("entity_id", flat=True)) == ["new"]
    assert unread.read(user.pk)[0] == 1


def test_an_older_event_written_after_a_newer_one_adds_its_count_and_keeps_the_newer_text(inbox_settings, user):
    # The newer event (t=2000) is written first; the older one (t=1000), retried, lands after it.
    send(message_at(user, 2000.0, {"title": "Budget v2"}, notification_id="new"))
    send(message_at(user, 1000.0, {"title": "Budget v1"}, notification_id="old"))
    item = InboxItem.objects.get(user=user)
    assert item.count == 2
    assert item.payload == {"title": "Budget v2"}
    assert item.title == "2 updates on Budget v2"
    assert item.happened_at.timestamp() == 2000.0
    # A newer one still takes over, and an event of the same time as the shown one too (the later write).
    send(message_at(user, 3000.0, {"title": "Budget v3"}))
    send(message_at(user, 3000.0, {"title": "Budget v3, fixed"}))
    item.refresh_from_db()
    assert (item.count, item.payload, item.title) == (4, {"title": "Budget v3, fixed"}, "4 updates on Budget v3, fixed")
    assert item.as_json()["happened_at"] == item.happened_at.isoformat()


def message_at(user, happened_at, payload, notification_id=None):
    from dataclasses import replace

    return replace(inbox_message(user.pk, payload=payload, notification_id=notification_id), happened_at=happened_at)


def test_a_row_keeps_its_payload_and_body_within_their_bounds(inbox_settings, user, settings):
    from notifications.inbox import bounds

    # What a token may send: a payload of SLUICE_MAX_PAYLOAD_BYTES (16 KiB), all of it in fields a template shows.
    hostile = {"title": "Quarterly report " + "x" * 7000, "summary": "y" * 8000, "n": 7}
    assert bounds.size(hostile) <= settings.SLUICE_MAX_PAYLOAD_BYTES
    send(inbox_message(user.pk, kind="doc.shared", entity_id="q3", payload=hostile))
    item = InboxItem.objects.get(user=user)
    assert bounds.size(item.payload) <= 2048  # SLUICE_INBOX["max_payload_bytes"]'s default
    assert set(item.payload) == {"title", "summary", "n"}  # every field a template names is still there
    assert item.payload["title"].startswith("Quarterly report x")
    assert item.payload["title"].endswith("…")
    assert item.payload["n"] == 7
    assert len(item.title) <= 300
    assert len(item.body) <= bounds.BODY_CHARS  # the default template puts the title in the body
    assert item.body.startswith("There is news about Quarterly report")
    small = {"title": "Memo", "summary": "short"}
    send(inbox_message(user.pk, kind="doc.shared", entity_id="memo", payload=small))
    assert InboxItem.objects.get(entity_id="memo").payload == small  # a payload within the bound is kept whole
    settings.SLUICE_INBOX = {"max_payload_bytes": 100}
    send(inbox_message(user.pk, kind="doc.shared", entity_id="tight", payload=hostile))
    assert bounds.size(InboxItem.objects.get(entity_id="tight").payload) <= 100
