"""Issue 40: the drain stores each buffer's entries once, in bounded steps under a lease, and trims what it stored;
what the buffer's bound trimmed first is counted as dropped; the prune keeps the retention; deleting a user deletes
their log."""

from datetime import timedelta

import pytest
from django.utils import timezone

from notifications import notify
from notifications.activity import tasks
from notifications.activity.models import ActivityEntry
from pipeline import activity_fields, housekeeping
from pipeline.observe.exporter import SluiceCollector
from pipeline.redis import keys

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(60)]


def test_the_drain_stores_each_entry_once_and_trims_the_stream(redis_client, user):
    for i in range(5):
        notify(user, "task.comment", entity_id=f"t{i}", payload={"title": f"Task {i}"})
    assert tasks.drain() == 5
    rows = list(ActivityEntry.objects.order_by("at", "id"))
    assert [(r.user_id, r.kind, r.entity_id, r.outcome, r.klass, r.title) for r in rows] == [
        (user.pk, "task.comment", f"t{i}", "accepted", "routine", f"Task {i}") for i in range(5)
    ]
    assert redis_client.xlen(keys.activity()) == 0
    assert tasks.drain() == 0
    assert activity_fields.dropped(redis_client) == 0


def test_a_batch_drained_again_is_stored_once(redis_client, user):
    notify(user, "task.comment", entity_id="t1")
    batch = redis_client.xrange(keys.activity())
    assert tasks.store(batch, "critical") == 1
    # A drain killed after its insert and before its bookkeeping: the next one reads the batch again.
    tasks.store(batch, "critical")
    assert ActivityEntry.objects.count() == 1
    assert tasks.drain() == 1
    assert ActivityEntry.objects.count() == 1


def test_the_drain_works_in_batches_within_its_step(redis_client, user, monkeypatch):
    monkeypatch.setattr(tasks, "DRAIN_BATCH", 3)
    for i in range(10):
        notify(user, "board.updated", entity_id=f"b{i}")
    step = housekeeping.Step("t", "s", 0)  # over at once: one batch a step
    assert tasks.drain_buffer(redis_client, "critical", step) == 3
    assert step.more
    assert tasks.drain_buffer(redis_client, "critical", housekeeping.unbounded()) == 7
    assert ActivityEntry.objects.count() == 10


def test_an_entry_of_a_user_who_is_gone_is_skipped(redis_client, user, django_user_model):
    gone = django_user_model.objects.create_user("gone", email="gone@example.com")
    notify(gone, "task.comment", entity_id="t1")
    notify(user, "task.comment", entity_id="t1")
    gone.delete()
    assert tasks.drain() == 2
    assert list(ActivityEntry.objects.values_list("user_id", flat=True)) == [user.pk]


def test_what_the_bound_trimmed_before_the_drain_is_counted_dropped(redis_client, user, settings):
    settings.SLUICE_ACTIVITY = {"buffer_entries": 100}
    for i in range(50):
        notify(user, "board.updated", entity_id=f"b{i}")
    tasks.drain()
    for i in range(1000):
        notify(user, "board.updated", entity_id=f"c{i % 9}")  # the drain is stopped meanwhile
    length = redis_client.xlen(keys.activity())
    assert length <= 200
    assert activity_fields.dropped(redis_client) == 1000 - length
    tasks.drain()
    assert ActivityEntry.objects.count() == 50 + length
    assert activity_fields.dropped(redis_client) == 1000 - length
    served = {family.name: family for family in SluiceCollector(120).collect()}
    [sample] = served["sluice_activity_dropped"].samples
    assert (sample.labels, sample.value) == ({"scope": "critical"}, 1000 - length)


def test_the_prune_deletes_past_the_retention_and_a_user_takes_their_log_along(redis_client, user, settings):
    settings.SLUICE_ACTIVITY = {"retention_days": 14}
    notify(user, "task.comment", entity_id="t1")
    notify(user, "task.comment", entity_id="t2")
    tasks.drain()
    old = ActivityEntry.objects.order_by("id").first()
    ActivityEntry.objects.filter(pk=old.pk).update(at=timezone.now() - timedelta(days=15))
    assert tasks.prune() == 1
    assert ActivityEntry.objects.count() == 1
    user.delete()
    assert ActivityEntry.objects.count() == 0
