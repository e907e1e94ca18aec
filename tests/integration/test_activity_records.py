"""Issue 40: the steps that happen in the host's database are rows of the log at once: a scheduled send scheduled,
moved (its page follows it back to its first version) and cancelled; an inbox item created, folded and read; a
provider's later word (delivered, bounced, opened)."""

import time

import pytest

from notifications import cancel_scheduled, notify
from notifications.activity import queries
from notifications.activity.models import ActivityEntry
from notifications.channels.base import Message
from notifications.delivery.records import StatusEvent, apply, record_sent
from notifications.inbox import fold
from notifications.inbox.views import change
from notifications.scheduling.api import notification_id

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(60)]


def outcomes(user):
    return list(ActivityEntry.objects.filter(user=user).order_by("at", "id").values_list("outcome", flat=True))


def test_a_scheduled_send_moved_then_cancelled_reads_as_one(redis_client, user):
    later = time.time() + 7200
    notify(user, "task.comment", entity_id="t1", payload={"title": "Standup"}, send_at=later, key="10m")
    notify(user, "task.comment", entity_id="t1", payload={"title": "Standup"}, send_at=later + 600, key="10m")
    assert cancel_scheduled("task.comment", "t1") == 1
    assert outcomes(user) == ["scheduled", "moved", "cancelled"]
    scheduled, moved, cancelled = ActivityEntry.objects.filter(user=user).order_by("at", "id")
    assert moved.fold_key == scheduled.notification_id
    assert cancelled.notification_id == moved.notification_id
    assert float(moved.detail) == pytest.approx(later + 600, abs=0.01)
    own, _carried, _carriers = queries.steps(cancelled.notification_id)
    assert [entry.outcome for entry in own] == ["scheduled", "moved", "cancelled"]


def test_the_moved_ids_are_the_ones_the_send_goes_out_with(redis_client, user):
    notify(user, "task.comment", entity_id="t1", send_at=time.time() + 7200, key="k")
    entry = ActivityEntry.objects.get(user=user)
    from notifications.scheduling.models import ScheduledSend

    row = ScheduledSend.objects.get()
    assert entry.notification_id == notification_id(row.pk, row.version)


def inbox_message(user, notification):
    return Message(
        id=notification,
        channel="inbox",
        kind="task.comment",
        klass="routine",
        user_id=user.pk,
        entity_id="t1",
        subject="",
        body="",
        payload={"title": "Hi"},
    )


def test_an_inbox_item_created_folded_then_read(redis_client, user, settings):
    settings.SLUICE_CHANNELS = {
        **settings.SLUICE_CHANNELS,
        "inbox": {"backend": "notifications.inbox.channel.InboxChannel"},
    }
    settings.SLUICE_KINDS = {**settings.SLUICE_KINDS, "task.comment": {"class": "routine", "channels": ["inbox"]}}
    fold.write(inbox_message(user, "n1"))
    fold.write(inbox_message(user, "n2"))
    from django.db.models import Q

    change(user.pk, "read_at", Q())
    assert outcomes(user) == ["inbox_created", "inbox_folded", "inbox_read"]
    assert len({e.fold_key for e in ActivityEntry.objects.filter(user=user)}) == 1


def test_a_providers_word_is_an_entry_of_the_send(redis_client, user):
    message = Message(
        id="n1",
        channel="email",
        kind="task.comment",
        klass="routine",
        user_id=user.pk,
        entity_id="e",
        subject="",
        body="",
    )
    record_sent(message, "ses", "m-1", "ada@example.com")
    apply(StatusEvent(status="delivered", message_id="m-1", provider="ses"))
    apply(StatusEvent(status=None, message_id="m-1", provider="ses", opened=True))
    apply(StatusEvent(status="bounced", message_id="m-1", provider="ses", detail="mailbox full"))
    rows = list(ActivityEntry.objects.filter(user=user).order_by("at", "id"))
    assert [(r.outcome, r.notification_id, r.provider) for r in rows] == [
        ("delivered", "n1", "ses"),
        ("opened", "n1", "ses"),
        ("bounced", "n1", "ses"),
    ]
    assert rows[-1].detail == "mailbox full"
