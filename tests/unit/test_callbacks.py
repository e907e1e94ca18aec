"""The generic HTTP providers' status callbacks: each status, basic auth, and hostile input."""

import base64
import json
from urllib.parse import urlencode

import pytest

from notifications.channels.base import Message
from notifications.delivery.records import record_sent
from notifications.models import Delivery
from pipeline.metrics import read_counters

HTTP = "notifications.channels.http_provider.HttpProviderChannel"
LOCMEM = "notifications.channels.locmem.LocmemChannel"
AUTH = "twilio:long-callback-secret"
URL = "/api/providers/sms/twilio/status/"
TWILIO_CALLBACK = {
    "basic_auth": [AUTH, "twilio:next-secret-for-rotation"],
    "message_id_field": "MessageSid",
    "status_field": "MessageStatus",
    "statuses": {"sent": "sent", "delivered": "delivered", "undelivered": "failed", "failed": "failed"},
}


@pytest.fixture
def sent(settings, redis_client, user):
    options = {"url": "https://api.example.com/send", "recipient": "payload.phone"}
    settings.SLUICE_CHANNELS = {
        "sms": {
            "providers": [
                {"name": "twilio", "backend": HTTP, "options": {**options, "status_callback": TWILIO_CALLBACK}},
                {"name": "vonage", "backend": HTTP, "options": options},
            ]
        },
        "email": {"backend": LOCMEM},
        "push": {"backend": LOCMEM},
    }
    for notification_id, provider, provider_id in (("n1", "twilio", "SM1"), ("n2", "vonage", "VN2")):
        message = Message(
            id=notification_id,
            channel="sms",
            kind="k",
            klass="critical",
            user_id=user.pk,
            entity_id="e",
            subject="",
            body="",
        )
        record_sent(message, provider, provider_id)


def basic(credentials):
    return "Basic " + base64.b64encode(credentials.encode()).decode()


def callback(client, fields, auth=AUTH, url=URL, as_json=False):
    headers = {"HTTP_AUTHORIZATION": basic(auth)} if auth else {}
    if as_json:
        return client.post(url, data=json.dumps(fields), content_type="application/json", **headers)
    return client.post(url, data=urlencode(fields), content_type="application/x-www-form-urlencoded", **headers)


def status(notification_id="n1"):
    return Delivery.objects.get(notification_id=notification_id).status


@pytest.mark.parametrize(
    ("reported", "expected", "result"),
    [("delivered", "delivered", "updated"), ("undelivered", "failed", "updated"), ("sent", "sent", "unchanged")],
)
def test_each_status_moves_the_record(client, sent, reported, expected, result):
    response = callback(client, {"MessageSid": "SM1", "MessageStatus": reported, "AccountSid": "AC1"})
    assert (response.status_code, response.json()) == (200, {"result": result})
    assert status() == expected


def test_a_status_it_does_not_map_is_acknowledged_and_ignored(client, sent):
    response = callback(client, {"MessageSid": "SM1", "MessageStatus": "queued"})
    assert (response.status_code, response.json()) == (200, {"result": "ignored"})
    assert status() == "sent"


def test_json_callbacks_and_the_rotated_credential_work_too(client, sent):
    fields = {"MessageSid": "SM1", "MessageStatus": "delivered"}
    assert callback(client, fields, auth="twilio:next-secret-for-rotation", as_json=True).status_code == 200
    assert status() == "delivered"
    assert read_counters()["delivery_status:sms:twilio:delivered"] == 1


@pytest.mark.parametrize(
    "header",
    [
        None,
        basic("twilio:wrong"),
        basic(AUTH + "x"),
        basic(AUTH)[:-4],
        "Basic !!!not-base64!!!",
        "Bearer " + base64.b64encode(AUTH.encode()).decode(),
        "Basic " + base64.b64encode(b"\xff\xfe:\x00").decode(),
    ],
)
def test_a_forged_callback_is_refused_and_changes_nothing(client, sent, header):
    headers = {"HTTP_AUTHORIZATION": header} if header else {}
    body = urlencode({"MessageSid": "SM1", "MessageStatus": "delivered"})
    response = client.post(URL, data=body, content_type="application/x-www-form-urlencoded", **headers)
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == 'Basic realm="sluice"'
    assert status() == "sent"


def test_a_callback_cannot_touch_another_providers_message(client, sent):
    response = callback(client, {"MessageSid": "VN2", "MessageStatus": "failed"})
    assert response.json() == {"result": "unmatched"}
    assert status("n2") == "sent"


@pytest.mark.parametrize(
    ("url", "code"),
    [
        ("/api/providers/sms/vonage/status/", 404),  # takes no callbacks
        ("/api/providers/sms/nosuch/status/", 404),
        ("/api/providers/email/twilio/status/", 404),
        ("/api/providers/nosuch/twilio/status/", 404),
    ],
)
def test_only_a_provider_with_callbacks_has_an_endpoint(client, sent, url, code):
    assert callback(client, {"MessageSid": "SM1", "MessageStatus": "delivered"}, url=url).status_code == code


def test_only_post(client, sent):
    response = client.get(URL, HTTP_AUTHORIZATION=basic(AUTH))
    assert response.status_code == 405
    assert response["Allow"] == "POST"


@pytest.mark.parametrize(
    ("body", "content_type", "code"),
    [
        ("x" * (16 * 1024 + 1), "application/json", 413),
        ("{not json", "application/json", 400),
        ("[1, 2]", "application/json", 400),
        ("[" * 5000 + "]" * 5000, "application/json", 400),
        (json.dumps({"MessageSid": 7, "MessageStatus": "delivered"}), "application/json", 400),
        (json.dumps({"MessageSid": "SM1", "MessageStatus": ["delivered"]}), "application/json", 400),
        (json.dumps({"MessageSid": "S" * 256, "MessageStatus": "delivered"}), "application/json", 400),
        (json.dumps({"MessageStatus": "delivered"}), "application/json", 400),
        ("MessageSid=SM1&MessageStatus=delivered", "text/plain", 400),
        ("&".join(f"f{n}=v" for n in range(200)), "application/x-www-form-urlencoded", 400),
        ("MessageSid=SM1&MessageStatus=%ff%fe", "application/x-www-form-urlencoded", 400),
    ],
)
def test_hostile_bodies_are_refused_and_change_nothing(client, sent, body, content_type, code):
    response = client.post(URL, data=body, content_type=content_type, HTTP_AUTHORIZATION=basic(AUTH))
    assert response.status_code == code
    assert status() == "sent"


def test_a_status_for_an_unknown_message_is_counted(client, sent):
    response = callback(client, {"MessageSid": "SM404", "MessageStatus": "delivered"})
    assert response.json() == {"result": "unmatched"}
    assert read_counters()["delivery:unmatched"] == 1
