"""Forged ESP events: only the tracking webhooks of the providers' ESPs are mounted, each authenticated, and an
event suppresses an address only when it matches a send of that ESP's provider to that very address."""

import base64
import json

import pytest
from django.core.checks import run_checks

from notifications.channels.base import Message
from notifications.delivery.records import record_sent
from notifications.models import Delivery, Suppression
from pipeline.metrics import read_counters

SECRET = "hooks:correct-horse-battery"
REFUSED = (r"sluice\.tracking .*tracking webhook refused", r"django\.request Service Unavailable")
# anymail warns that it no longer supports SendGrid officially; its webhook still parses SendGrid's events.
pytestmark = pytest.mark.filterwarnings("ignore::anymail.exceptions.AnymailNotSupportedWarning")


def esp_provider(name):
    return {
        "name": name,
        "backend": "notifications.channels.esp.AnymailChannel",
        "options": {"email_backend": f"anymail.backends.{name}.EmailBackend"},
    }


@pytest.fixture
def esps(settings, redis_client):
    """The email channel sends through Postmark, then SendGrid; the webhooks share their basic-auth secret."""
    settings.SLUICE_CHANNELS = {
        **settings.SLUICE_CHANNELS,
        "email": {"providers": [esp_provider("postmark"), esp_provider("sendgrid")]},
    }
    settings.ANYMAIL = {"WEBHOOK_SECRET": SECRET}
    return settings


def sent(user, provider, notification_id="n1", message_id="pm-1", recipient="ada@example.com"):
    message = Message(
        id=notification_id,
        channel="email",
        kind="login.code",
        klass="critical",
        user_id=user.pk,
        entity_id="e",
        subject="",
        body="",
    )
    assert record_sent(message, provider, message_id, recipient)


def bounce(address, message_id="pm-1", notification_id="n1"):
    return {
        "RecordType": "Bounce",
        "Type": "HardBounce",
        "MessageID": message_id,
        "Email": address,
        "BouncedAt": "2026-11-30T10:00:01Z",
        "Description": "unknown user",
        "Metadata": {"sluice_id": notification_id, "sluice_channel": "email"} if notification_id else {},
    }


def post(client, esp, body, secret=SECRET):
    auth = {"HTTP_AUTHORIZATION": "Basic " + base64.b64encode(secret.encode()).decode()} if secret else {}
    return client.post(f"/api/anymail/{esp}/tracking/", data=json.dumps(body), content_type="application/json", **auth)


def sendgrid_bounces(count, domain="victim.example"):
    return [
        {"email": f"user{i}@{domain}", "event": "bounce", "smtp-id": f"sg-{i}", "timestamp": 1764496800}
        for i in range(count)
    ]


@pytest.mark.django_db
def test_no_esp_webhook_is_mounted_when_no_provider_uses_an_esp(client):
    # Sluice's own settings send email through Django's EMAIL_BACKEND: no ESP, no webhook, inbound ones never.
    for path in ("anymail/postmark/tracking/", "anymail/sendgrid/tracking/", "anymail/postmark/inbound/"):
        assert client.post(f"/api/{path}", data="{}", content_type="application/json").status_code == 404, path
    assert not Suppression.objects.exists()


def test_only_the_providers_esps_are_mounted(client, esps, db):
    assert post(client, "postmark", bounce("x@example.com")).status_code == 200
    assert post(client, "mailgun", bounce("x@example.com")).status_code == 404
    assert client.post("/api/anymail/postmark/inbound/", data="{}", content_type="application/json").status_code == 404


@pytest.mark.expected_errors(*REFUSED)
def test_a_webhook_without_its_secret_fails_the_check_and_refuses_every_event(client, esps, user):
    esps.ANYMAIL = {}
    sent(user, "postmark")
    errors = [e for e in run_checks() if e.id == "sluice.E020"]
    assert len(errors) == 2, errors  # postmark's and sendgrid's
    assert "WEBHOOK_SECRET" in errors[0].msg
    response = post(client, "postmark", bounce("ada@example.com"), secret=None)
    assert response.status_code == 503
    assert response.json()["error"] == "webhook_not_configured"
    assert Delivery.objects.get().status == "sent"
    assert not Suppression.objects.exists()
    assert read_counters()["tracking_events:postmark:refused"] == 1
    esps.ANYMAIL = {"WEBHOOK_SECRET": SECRET}
    assert not [e for e in run_checks() if e.id == "sluice.E020"]


def test_a_bounce_for_an_address_never_sent_to_suppresses_no_one(client, esps, db):
    assert post(client, "postmark", bounce("alice@victim.example", "pm-x", None)).status_code == 200
    assert not Suppression.objects.exists()
    assert not Delivery.objects.exists()
    assert read_counters()["tracking_events:postmark:unmatched"] == 1


def test_a_bounce_naming_another_address_than_the_send_changes_nothing(client, esps, user):
    sent(user, "postmark")
    assert post(client, "postmark", bounce("alice@victim.example")).status_code == 200
    assert Delivery.objects.get().status == "sent"
    assert not Suppression.objects.exists()
    assert read_counters()["tracking_events:postmark:other_recipient"] == 1


def test_an_esp_speaks_only_for_its_own_sends(client, esps, user):
    sent(user, "sendgrid", message_id="sg-1")
    # Postmark's webhook names SendGrid's send, by its notification id and by its message id: neither matches.
    assert post(client, "postmark", bounce("ada@example.com", "sg-1")).status_code == 200
    assert post(client, "postmark", bounce("ada@example.com", "sg-1", None)).status_code == 200
    assert Delivery.objects.get().status == "sent"
    assert not Suppression.objects.exists()
    assert read_counters()["tracking_events:postmark:unmatched"] == 2


def test_the_genuine_bounce_of_a_send_suppresses_its_address(client, esps, user):
    sent(user, "postmark")
    assert post(client, "postmark", bounce("Ada@Example.com")).status_code == 200
    assert Delivery.objects.get().status == "bounced"
    assert Suppression.objects.get().address == "ada@example.com"
    assert read_counters()["tracking_events:postmark:updated"] == 1


def test_the_events_one_request_applies_are_capped(client, esps, user):
    esps.SLUICE_TRACKING_MAX_EVENTS = 3
    sent(user, "sendgrid", message_id="sg-0")
    events = sendgrid_bounces(10)
    events[0]["email"] = "ada@example.com"
    assert post(client, "sendgrid", events).status_code == 200
    counters = read_counters()
    assert counters["tracking_events:sendgrid:over_cap"] == 7
    assert counters["tracking_events:sendgrid:updated"] == 1
    assert counters["tracking_events:sendgrid:unmatched"] == 2
    assert list(Suppression.objects.values_list("address", flat=True)) == ["ada@example.com"]
