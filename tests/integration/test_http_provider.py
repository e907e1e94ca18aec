"""The generic HTTP provider against a real HTTP server on loopback: templates, auth, statuses, deadlines."""

import base64
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs

import pytest
from django.core.exceptions import ImproperlyConfigured

from notifications.channels.base import Message, PermanentSendError, TransientSendError
from notifications.channels.http_provider import HttpProviderChannel
from sluice_tools.bench.standin import ProviderStandIn
from sluice_tools.redis_server import free_port


def message(**overrides):
    fields = dict(
        id="n1",
        channel="sms",
        kind="login.code",
        klass="critical",
        user_id=1,
        entity_id="e1",
        subject="Sign-in code",
        body="Your code is 123456",
        payload={"phone": "+15550100"},
    )
    return Message(**{**fields, **overrides})


@pytest.fixture
def server():
    """A provider that records each request and answers what ``answer`` holds (status, JSON body)."""
    seen, answer = [], {"status": 201, "body": {"sid": "SM1", "result": {"name": "projects/p/messages/7"}}}

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers["Content-Length"]))
            seen.append((self.path, dict(self.headers), body))
            data = json.dumps(answer["body"]).encode()
            self.send_response(answer["status"])
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1/send?x=1", seen, answer
    httpd.shutdown()
    httpd.server_close()


def fcm_token():
    return {"Authorization": "Bearer fresh-token"}


def test_fcm_style_json_with_a_token_callable_and_the_id_as_idempotency_key(server):
    url, seen, _answer = server
    channel = HttpProviderChannel(
        "push",
        url=url,
        recipient="payload.phone",
        auth="tests.integration.test_http_provider.fcm_token",
        body={"message": {"token": "{recipient}", "notification": {"title": "{subject}", "body": "{body}"}}},
        message_id_field="result.name",
    )
    assert channel.send(message()) == "projects/p/messages/7"
    [(path, headers, body)] = seen
    assert path == "/v1/send?x=1"
    assert headers["Authorization"] == "Bearer fresh-token"
    assert headers["Idempotency-Key"] == "n1"
    assert headers["Content-Type"] == "application/json"
    assert json.loads(body) == {
        "message": {"token": "+15550100", "notification": {"title": "Sign-in code", "body": "Your code is 123456"}}
    }


def test_twilio_style_form_with_basic_auth(server):
    url, seen, _answer = server
    basic = "Basic " + base64.b64encode(b"AC123:secret").decode()
    channel = HttpProviderChannel(
        "sms",
        url=url,
        format="form",
        recipient="payload.phone",
        headers={"Authorization": basic},
        body={"To": "{recipient}", "From": "+15550199", "Body": "{body}"},
        message_id_field="sid",
        idempotency_header="I-Twilio-Idempotency-Token",
    )
    assert channel.send(message()) == "SM1"
    [(_path, headers, body)] = seen
    assert headers["Authorization"] == basic
    assert headers["I-Twilio-Idempotency-Token"] == "n1"
    assert parse_qs(body.decode()) == {"To": ["+15550100"], "From": ["+15550199"], "Body": ["Your code is 123456"]}


def test_a_value_with_braces_is_never_read_as_a_placeholder(server):
    url, seen, _answer = server
    channel = HttpProviderChannel("sms", url=url, recipient="payload.phone", body={"text": "{body}"})
    channel.send(message(body="literally {id} and {recipient}"))
    assert json.loads(seen[0][2]) == {"text": "literally {id} and {recipient}"}


@pytest.mark.parametrize(
    ("status", "options", "error"),
    [
        (400, {}, PermanentSendError),
        (404, {}, PermanentSendError),
        (422, {}, PermanentSendError),
        (401, {}, TransientSendError),  # the provider's credentials: another provider may work
        (429, {}, TransientSendError),
        (503, {}, TransientSendError),
        (418, {}, TransientSendError),  # listed nowhere: transient, so it ends in the dead letters at worst
        (404, {"permanent_statuses": [400], "transient_statuses": [404]}, TransientSendError),
    ],
)
def test_the_status_codes_that_mean_transient_or_permanent(server, status, options, error):
    url, _seen, answer = server
    answer["status"] = status
    channel = HttpProviderChannel("sms", url=url, recipient="payload.phone", **options)
    with pytest.raises(error, match=f"HTTP {status}"):
        channel.send(message())


def test_a_provider_that_drips_its_answer_is_cut_off_at_the_timeout():
    with ProviderStandIn("slow", mode="drip", hang_s=20) as slow:
        channel = HttpProviderChannel("sms", url=slow.url, recipient="payload.phone", timeout_s=0.5)
        started = time.monotonic()
        with pytest.raises(TransientSendError, match="timed out"):
            channel.send(message())
        assert time.monotonic() - started < 3  # each byte came within the socket timeout; the deadline held


def test_the_timeout_never_runs_past_the_message_deadline():
    with ProviderStandIn("hung", mode="timeout", hang_s=20) as hung:
        channel = HttpProviderChannel("sms", url=hung.url, recipient="payload.phone", timeout_s=15)
        started = time.monotonic()
        with pytest.raises(TransientSendError, match="timed out"):
            channel.send(message(deadline=time.monotonic() + 0.4))
        assert time.monotonic() - started < 3
        with pytest.raises(TransientSendError, match="no time left"):
            channel.send(message(deadline=time.monotonic() - 1))


def test_an_unreachable_provider_is_transient():
    channel = HttpProviderChannel("sms", url=f"http://127.0.0.1:{free_port()}/", recipient="payload.phone")
    with pytest.raises(TransientSendError, match="unreachable"):
        channel.send(message())


def test_the_recipient_comes_from_the_payload_the_user_or_a_callable(server, user):
    url, seen, _answer = server
    with pytest.raises(PermanentSendError, match="no recipient"):
        HttpProviderChannel("sms", url=url, recipient="payload.phone").send(message(payload={}))
    HttpProviderChannel("sms", url=url, recipient="user.email").send(message(user_id=user.pk))
    HttpProviderChannel("sms", url=url, recipient="tests.integration.test_http_provider.device_of").send(message())
    assert [json.loads(body)["to"] for _path, _headers, body in seen] == ["ada@example.com", "device-n1"]


def device_of(message):
    return f"device-{message.id}"


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"recipient": "payload.phone"}, "options['url'] must be an http(s) URL"),
        ({"url": "ftp://x", "recipient": "payload.phone"}, "options['url'] must be an http(s) URL"),
        ({"url": "http://x", "recipient": "payload.phone", "format": "xml"}, "'json' or 'form'"),
        ({"url": "http://x"}, "options['recipient'] is required"),
        ({"url": "http://x", "recipient": "user.phone"}, "a field the user model lacks"),
        ({"url": "http://x", "recipient": "payload.p", "body": {"a": "{password}"}}, "unknown fields ['password']"),
        (
            {"url": "http://x", "recipient": "payload.p", "permanent_statuses": [400], "transient_statuses": [400]},
            "both",
        ),
        ({"url": "http://x", "recipient": "payload.p", "status_callback": {}}, "never accepted unauthenticated"),
        (
            {"url": "http://x", "recipient": "payload.p", "status_callback": {"basic_auth": "a:b"}},
            "at least 8 characters",
        ),
    ],
)
def test_a_bad_option_is_refused_when_the_backend_is_built(db, options, words):
    with pytest.raises(ImproperlyConfigured) as err:
        HttpProviderChannel("sms", **options)
    assert words in str(err.value)


def test_a_provider_that_cannot_be_built_is_a_check_error(settings):
    from notifications.checks import check_channels

    settings.SLUICE_CHANNELS = {
        "email": {"backend": "notifications.channels.locmem.LocmemChannel"},
        "push": {"backend": "notifications.channels.locmem.LocmemChannel"},
        "sms": {
            "providers": [{"name": "twilio", "backend": "notifications.channels.http_provider.HttpProviderChannel"}]
        },
    }
    [error] = check_channels()
    assert error.id == "sluice.E002"
    assert "SLUICE_CHANNELS['sms'] provider 'twilio' cannot be built" in error.msg
