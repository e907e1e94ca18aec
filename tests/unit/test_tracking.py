"""Delivery status from anymail's own tracking webhooks (its views, its signal), forged requests included.

Sluice mounts the tracking webhooks of the ESPs its providers use: here Postmark and Mailgun, two providers of the
email channel (tests/integration/test_security_webhooks.py covers what is mounted, and the refusals)."""

import base64
import hashlib
import hmac
import json

import pytest

from notifications.channels.base import Message
from notifications.delivery.records import record_sent
from notifications.models import Delivery, Suppression
from pipeline.metrics import read_counters
from tests.integration.test_security_webhooks import esp_provider

POSTMARK_URL = "/api/anymail/postmark/tracking/"
MAILGUN_URL = "/api/anymail/mailgun/tracking/"
SECRET = "hooks:correct-horse-battery"
SIGNING_KEY = "mailgun-signing-key"
FORGED = "django.security.AnymailWebhookValidationFailure"
METADATA = {"sluice_id": "n1", "sluice_channel": "email", "sluice_kind": "login.code"}


@pytest.fixture(autouse=True)
def esps(settings):
    """The email channel sends through Postmark, then Mailgun: both ESPs' tracking webhooks are mounted."""
    settings.SLUICE_CHANNELS = {
        **settings.SLUICE_CHANNELS,
        "email": {"providers": [esp_provider("postmark"), esp_provider("mailgun")]},
    }


def login_code(notification_id, user):
    """The email of a login code to ``user``, as a worker hands it to the email channel."""
    return Message(notification_id, "email", "login.code", "critical", user.pk, "e", "", "")


@pytest.fixture
def sent(settings, redis_client, user):
    """A notification that Postmark accepted as pm-1 for ada@example.com, recorded as the worker records it."""
    settings.ANYMAIL = {"WEBHOOK_SECRET": SECRET, "MAILGUN_WEBHOOK_SIGNING_KEY": SIGNING_KEY}
    message = login_code("n1", user)
    assert record_sent(message, "postmark", "pm-1", "ada@example.com")
    return message


def postmark(client, event, secret=SECRET):
    headers = {"HTTP_AUTHORIZATION": "Basic " + base64.b64encode(secret.encode()).decode()} if secret else {}
    return client.post(POSTMARK_URL, data=json.dumps(event), content_type="application/json", **headers)


def record():
    return Delivery.objects.get(notification_id="n1", channel="email")


DELIVERY = {
    "RecordType": "Delivery",
    "MessageID": "pm-1",
    "Recipient": "ada@example.com",
    "DeliveredAt": "2026-11-30T10:00:00Z",
    "Details": "smtp;250 2.0.0 OK",
    "Metadata": METADATA,
}
HARD_BOUNCE = {
    "RecordType": "Bounce",
    "ID": 42,
    "Type": "HardBounce",
    "MessageID": "pm-1",
    "Description": "The server was unable to deliver your message (ex: unknown user, mailbox not found).",
    "Details": "smtp;550 5.1.1 The email account that you tried to reach does not exist.",
    "Email": "Ada@Example.com",
    "BouncedAt": "2026-11-30T10:00:01Z",
    "Metadata": METADATA,
}
COMPLAINT = {**HARD_BOUNCE, "RecordType": "SpamComplaint", "Type": "SpamComplaint", "Description": "spam"}
OPEN = {"RecordType": "Open", "MessageID": "pm-1", "Recipient": "ada@example.com", "ReceivedAt": "2026-11-30T10:05:00Z"}
BAD_ADDRESS = {**HARD_BOUNCE, "Type": "BadEmailAddress", "Description": "Invalid email address"}
SOFT = {**HARD_BOUNCE, "Type": "Transient", "Description": "Message delayed"}


def test_delivered(client, sent):
    assert postmark(client, DELIVERY).status_code == 200
    row = record()
    assert (row.status, row.recipient, row.delivered_at.isoformat()) == (
        "delivered",
        "ada@example.com",
        "2026-11-30T10:00:00+00:00",
    )
    assert read_counters()["delivery_status:email:postmark:delivered"] == 1
    assert not Suppression.objects.exists()


def test_a_hard_bounce_marks_the_record_and_suppresses_the_address(client, sent):
    from notifications.channels.base import SuppressedRecipient
    from notifications.channels.email import address_of

    assert postmark(client, HARD_BOUNCE).status_code == 200
    assert (record().status, record().detail[:22]) == ("bounced", "The server was unable ")
    suppression = Suppression.objects.get()
    assert (suppression.address, suppression.reason, suppression.provider, suppression.notification_id) == (
        "ada@example.com",
        "bounced",
        "postmark",
        "n1",
    )
    with pytest.raises(SuppressedRecipient):
        address_of(sent.user_id)  # what the email channels check before every send
    counters = read_counters()
    assert counters["suppressions:bounced"] == 1
    assert counters["delivery_status:email:postmark:bounced"] == 1


def test_a_complaint_suppresses_the_address(client, sent):
    assert postmark(client, COMPLAINT).status_code == 200
    assert record().status == "complained"
    assert Suppression.objects.get().reason == "complained"


def test_an_open_stamps_the_record_and_proves_its_delivery(client, sent):
    assert postmark(client, OPEN).status_code == 200
    row = record()
    assert (row.status, row.opened_at.isoformat()) == ("delivered", "2026-11-30T10:05:00+00:00")


def test_a_rejected_address_is_failed_and_a_soft_bounce_changes_nothing(client, sent):
    assert postmark(client, SOFT).status_code == 200
    assert record().status == "sent"
    assert postmark(client, BAD_ADDRESS).status_code == 200
    assert record().status == "failed"
    assert not Suppression.objects.exists()  # the ESP refused it; it never bounced


def test_a_late_delivered_never_undoes_a_bounce(client, sent):
    postmark(client, HARD_BOUNCE)
    postmark(client, DELIVERY)
    assert record().status == "bounced"


def test_an_event_that_comes_before_the_workers_record_creates_it_and_keeps_its_status(client, settings, user):
    settings.ANYMAIL = {"WEBHOOK_SECRET": SECRET}
    assert postmark(client, {**DELIVERY, "Metadata": {**METADATA, "sluice_id": "n2"}}).status_code == 200
    message = login_code("n2", user)
    assert record_sent(message, "postmark", "pm-1", "ada@example.com")
    row = Delivery.objects.get(notification_id="n2")
    assert (row.status, row.provider, row.user_id, row.kind) == ("delivered", "postmark", user.pk, "login.code")


def test_an_event_for_an_unknown_message_is_counted_and_suppresses_no_one(client, sent):
    orphan = {**HARD_BOUNCE, "MessageID": "pm-unknown", "Metadata": {}, "Email": "bob@example.com"}
    assert postmark(client, orphan).status_code == 200
    counters = read_counters()
    assert counters["delivery:unmatched"] == 1
    assert counters["tracking_events:postmark:unmatched"] == 1
    assert record().status == "sent"
    assert not Suppression.objects.exists()


@pytest.mark.expected_errors(FORGED)
@pytest.mark.parametrize("secret", [None, "hooks:wrong", "hooks", SECRET + "x"])
def test_a_forged_request_is_refused_and_changes_nothing(client, sent, secret):
    assert postmark(client, HARD_BOUNCE, secret=secret).status_code == 400
    assert record().status == "sent"
    assert not Suppression.objects.exists()


def test_hostile_metadata_matches_nothing_it_should_not(client, sent):
    hostile = {
        **HARD_BOUNCE,
        "MessageID": "pm-x' OR '1'='1",
        "Email": "not-an-address",
        "Metadata": {"sluice_id": "n1\x00" + "x" * 5000, "sluice_channel": ["email"]},
    }
    assert postmark(client, hostile).status_code == 200
    assert record().status == "sent"
    assert not Suppression.objects.exists()
    assert read_counters()["delivery:unmatched"] == 1


def mailgun(client, event_data, key=SIGNING_KEY):
    token, timestamp = "a" * 50, "1764496800"
    signature = hmac.new(key.encode(), f"{timestamp}{token}".encode(), hashlib.sha256).hexdigest()
    body = {"signature": {"token": token, "timestamp": timestamp, "signature": signature}, "event-data": event_data}
    # WEBHOOK_SECRET is shared by every ESP's webhook: Mailgun's needs the basic auth, then its signature.
    auth = "Basic " + base64.b64encode(SECRET.encode()).decode()
    return client.post(MAILGUN_URL, data=json.dumps(body), content_type="application/json", HTTP_AUTHORIZATION=auth)


MAILGUN_DELIVERED = {
    "event": "delivered",
    "timestamp": 1764496800.5,
    "recipient": "ada@example.com",
    "message": {"headers": {"message-id": "mg-1@example.com"}},
    "user-variables": METADATA,
}


@pytest.mark.expected_errors(FORGED)
def test_mailgun_events_are_checked_against_its_signature(client, sent):
    Delivery.objects.update(provider="mailgun")  # Mailgun speaks only for what was sent through it
    assert mailgun(client, MAILGUN_DELIVERED, key="not-the-key").status_code == 400
    assert record().status == "sent"
    assert mailgun(client, MAILGUN_DELIVERED).status_code == 200
    assert record().status == "delivered"
