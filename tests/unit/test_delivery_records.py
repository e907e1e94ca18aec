"""Delivery status records: bounded by retention (pruned by beat), searchable in the admin, counted in the exporter;
the suppressions' and the providers' admin pages."""

import json
import threading
import urllib.request
from datetime import timedelta
from wsgiref.simple_server import make_server

import pytest
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from notifications.channels.base import Message
from notifications.delivery import records
from notifications.delivery.records import StatusEvent, apply, record_sent
from notifications.models import Delivery, Suppression
from pipeline.connections import get_redis
from pipeline.gates import breaker
from pipeline.metrics import read_counters
from pipeline.observe.exporter import _QuietHandler, _Server, application

HTTP = "notifications.channels.http_provider.HttpProviderChannel"
LOCMEM = "notifications.channels.locmem.LocmemChannel"


def message(notification_id, user_id, kind="login.code", channel="sms"):
    return Message(
        id=notification_id,
        channel=channel,
        kind=kind,
        klass="critical",
        user_id=user_id,
        entity_id="e",
        subject="",
        body="",
    )


@pytest.fixture
def providers_configured(settings, redis_client):
    options = {"url": "https://sms.example.com/send", "recipient": "payload.phone"}
    settings.SLUICE_CHANNELS = {
        "sms": {
            "providers": [
                {"name": "a", "backend": HTTP, "options": options},
                {"name": "b", "backend": HTTP, "options": options},
            ]
        },
        "email": {"backend": LOCMEM},
        "push": {"backend": LOCMEM},
    }


def test_records_older_than_the_retention_are_pruned(providers_configured, settings, user):
    settings.SLUICE_DELIVERY_RETENTION_DAYS = 7
    for n, age_days in enumerate((1, 6, 8, 30)):
        record_sent(message(f"n{n}", user.pk), "a", f"m{n}")
        Delivery.objects.filter(notification_id=f"n{n}").update(sent_at=timezone.now() - timedelta(days=age_days))
    assert records.prune() == 2
    assert sorted(Delivery.objects.values_list("notification_id", flat=True)) == ["n0", "n1"]
    assert read_counters()["delivery:pruned"] == 2


def test_a_prune_step_stops_at_its_budget_and_asks_for_the_next(providers_configured, settings, user, monkeypatch):
    from pipeline import housekeeping

    settings.SLUICE_DELIVERY_RETENTION_DAYS = 7
    for n in range(3):
        record_sent(message(f"n{n}", user.pk), "a", f"m{n}")
    Delivery.objects.update(sent_at=timezone.now() - timedelta(days=8))
    monkeypatch.setattr(housekeeping, "STEP_BUDGET_S", 0)
    monkeypatch.setattr(records, "PRUNE_BATCH", 2)
    client = get_redis()
    client.delete("background")
    assert records.prune() == 2  # one batch, then its budget is spent
    assert Delivery.objects.count() == 1
    [queued] = client.lrange("background", 0, -1)
    assert json.loads(queued)["headers"]["task"] == records.PRUNE_TASK  # the next step, on the background pool
    assert records.prune() == 1
    assert client.llen("background") == 1  # caught up: no next step asked for


def test_beat_prunes_them_every_hour(db):
    from django_celery_beat.models import PeriodicTask

    from pipeline.beat import SluiceScheduler

    task = PeriodicTask.objects.get(name="sluice: delivery records prune")
    assert (task.task, task.enabled, task.interval.every, task.interval.period) == (
        records.PRUNE_TASK,
        True,
        3600,
        "seconds",
    )
    assert task.task.startswith("sluice.")  # so Sluice's own beat runs it
    assert task in SluiceScheduler.enabled_models_qs(SluiceScheduler.__new__(SluiceScheduler))


def test_a_record_that_cannot_be_written_never_fails_the_send(providers_configured, db, caplog):
    assert not record_sent(message(None, 1), "a", "m1")  # the id is NOT NULL: the database refuses it
    assert "not recorded" in caplog.text


def test_a_record_moves_forward_only(providers_configured, user):
    record_sent(message("n1", user.pk), "a", "m1")
    steps = ["delivered", "sent", "failed", "delivered", "complained", "bounced"]
    seen = []
    for status in steps:
        apply(StatusEvent(status=status, message_id="m1", provider="a"))
        seen.append(Delivery.objects.get().status)
    assert seen == ["delivered", "delivered", "failed", "failed", "complained", "complained"]


def test_the_admin_searches_records_by_user_kind_status_and_provider(client, staff, providers_configured, user):
    record_sent(message("n-ada", user.pk), "a", "m1")
    record_sent(message("n-other", user.pk, kind="task.comment"), "b", "m2")
    apply(StatusEvent(status="delivered", message_id="m2", provider="b"))
    client.force_login(staff("viewer", "view_delivery"))
    url = "/admin/sluice_notifications/delivery/"
    page = client.get(url, {"q": "ada"}).content.decode()  # the user's name
    assert "n-ada" in page
    assert "n-other" in page
    by_kind = client.get(url, {"kind": "task.comment"}).content.decode()
    assert "n-other" in by_kind
    assert "n-ada" not in by_kind
    by_status = client.get(url, {"status__exact": "delivered"}).content.decode()
    assert "n-other" in by_status
    assert "n-ada" not in by_status
    by_provider = client.get(url, {"provider": "a"}).content.decode()
    assert "n-ada" in by_provider
    assert "n-other" not in by_provider
    assert client.get(url + "add/").status_code == 403


def test_lifting_a_suppression_needs_the_delete_permission(client, staff, db):
    Suppression.objects.create(address="ada@example.com", reason="bounced")
    url = "/admin/sluice_notifications/suppression/"
    client.force_login(staff("viewer", "view_suppression"))
    page = client.get(url).content.decode()
    assert "ada@example.com" in page
    assert "Lift selected" not in page
    refused = client.post(url, {"action": "lift", "_selected_action": [Suppression.objects.get().pk]})
    assert Suppression.objects.exists()
    assert refused.status_code in (200, 302, 403)
    client.force_login(staff("lifter", "view_suppression", "delete_suppression"))
    assert "Lift selected" in client.get(url).content.decode()
    client.post(url, {"action": "lift", "_selected_action": [Suppression.objects.get().pk]})
    assert not Suppression.objects.exists()


def test_the_providers_page_shows_each_breaker_and_staff_force_one(client, staff, providers_configured, db):
    url = "/admin/sluice_notifications/provider/"
    client.force_login(staff("viewer", "view_provider"))
    page = client.get(url).content.decode()
    assert "sms/a" in page
    assert "sms/b" in page
    assert "Force open" not in page
    assert client.post(url, {"action": "force_open", "ids": ["sms/a"]}).status_code == 403
    client.force_login(staff("operator", "view_provider", "change_provider"))
    client.post(url, {"action": "force_open", "ids": ["sms/a", "sms/nosuch", "other/x"]})
    a, b = breaker.states()
    assert (a.state, a.forced, b.state) == ("open", "open", "closed")
    client.post(url, {"action": "release", "ids": ["sms/a"]})
    assert breaker.states()[0].forced == ""
    assert client.post(url, {"action": "delete_everything", "ids": ["sms/a"]}).status_code == 403


def test_the_exporter_counts_states_transitions_calls_and_statuses(providers_configured, user):
    breaker.force("sms", "a", "open")
    record_sent(message("n1", user.pk), "b", "m1")
    apply(StatusEvent(status="delivered", message_id="m1", provider="b"))
    apply(StatusEvent(status="failed", message_id="unknown", provider="b"))
    server = make_server("127.0.0.1", 0, application(120), server_class=_Server, handler_class=_QuietHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{server.server_port}/metrics", timeout=10) as response:
            text = response.read().decode()
    finally:
        server.shutdown()
        server.server_close()
    found = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }
    assert found[("sluice_provider_state", (("channel", "sms"), ("provider", "a")))] == 2
    assert found[("sluice_provider_state", (("channel", "sms"), ("provider", "b")))] == 0
    assert found[("sluice_provider_forced", (("channel", "sms"), ("provider", "a")))] == 1
    assert found[("sluice_provider_transitions_total", (("channel", "sms"), ("provider", "a"), ("to", "open")))] == 1
    assert found[("sluice_delivery_status_total", (("channel", "sms"), ("provider", "b"), ("status", "sent")))] == 1
    assert (
        found[("sluice_delivery_status_total", (("channel", "sms"), ("provider", "b"), ("status", "delivered")))] == 1
    )
    assert found[("sluice_delivery_events_unmatched_total", ())] == 1
    assert not any(secret in text for secret in ("ada", '"n1"', '"m1"'))  # no user, no message ids
