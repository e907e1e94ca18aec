"""AnymailChannel through anymail's real ESP backends, against ESP APIs stood in for by an HTTP server on loopback."""

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from notifications.channels.base import Message, PermanentSendError, SuppressedRecipient, TransientSendError
from notifications.channels.esp import AnymailChannel
from notifications.models import Suppression

POSTMARK = "anymail.backends.postmark.EmailBackend"
BREVO = "anymail.backends.brevo.EmailBackend"
OK = {
    "To": "ada@example.com",
    "SubmittedAt": "2026-11-30T10:00:00Z",
    "MessageID": "pm-1",
    "ErrorCode": 0,
    "Message": "OK",
}
INACTIVE = {
    "ErrorCode": 406,
    "Message": "You tried to send to a recipient that has been marked as inactive.\nFound inactive addresses: "
    "ada@example.com.\nInactive recipients are ones that have generated a hard bounce or a spam complaint. ",
}


def message(user_id, **overrides):
    fields = dict(
        id="n1",
        channel="email",
        kind="login.code",
        klass="critical",
        user_id=user_id,
        entity_id="e1",
        subject="Sign-in code",
        body="Your code is 123456",
    )
    return Message(**{**fields, **overrides})


@pytest.fixture
def esp():
    """An ESP API: records each request, answers ``answer`` (status, JSON), or hangs ``hang_s`` first."""
    seen, answer = [], {"status": 200, "body": OK, "hang_s": 0}

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers["Content-Length"]))
            seen.append((self.path, dict(self.headers), json.loads(body)))
            time.sleep(answer["hang_s"])  # an ESP that hangs: the test is about the deadline
            data = json.dumps(answer["body"]).encode()
            try:
                self.send_response(answer["status"])
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except OSError:
                pass

        def log_message(self, *args):
            pass

    class Server(ThreadingHTTPServer):
        daemon_threads = True
        block_on_close = False

    httpd = Server(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/", seen, answer
    httpd.shutdown()
    httpd.server_close()


def postmark(url, **options):
    return AnymailChannel(
        "email",
        email_backend=POSTMARK,
        backend_options={"server_token": "pm-token", "api_url": url},
        from_email="sluice@example.com",
        **options,
    )


def test_a_send_carries_the_notification_id_as_metadata_and_returns_the_esps_message_id(esp, user):
    url, seen, _answer = esp
    assert postmark(url).send(message(user.pk)).message_id == "pm-1"
    [(path, headers, payload)] = seen
    assert path == "/email"
    assert headers["X-Postmark-Server-Token"] == "pm-token"
    assert payload["To"] == "ada@example.com"
    assert payload["Metadata"] == {"sluice_id": "n1", "sluice_channel": "email", "sluice_kind": "login.code"}
    assert payload["Tag"] == "login.code"
    assert {"Name": "X-Sluice-Id", "Value": "n1"} in payload["Headers"]


def test_an_esp_that_takes_an_idempotency_key_gets_the_notification_id(esp, user):
    url, seen, answer = esp
    answer["status"], answer["body"] = 201, {"messageId": "<brevo-1@smtp-relay>"}
    channel = AnymailChannel(
        "email", email_backend=BREVO, backend_options={"api_key": "k", "api_url": url}, from_email="s@example.com"
    )
    assert channel.send(message(user.pk)).message_id == "<brevo-1@smtp-relay>"
    [(path, _headers, payload)] = seen
    assert path == "/smtp/email"
    assert payload["headers"]["idempotencyKey"] == "n1"


@pytest.mark.parametrize(
    ("status", "body", "error", "words"),
    [
        (422, INACTIVE, PermanentSendError, "recipient refused"),
        (422, {"ErrorCode": 300, "Message": "Invalid 'From' address: 'x'."}, PermanentSendError, "refused the message"),
        (401, {"ErrorCode": 10, "Message": "Bad or missing Server API token."}, TransientSendError, "the ESP failed"),
        (500, {"ErrorCode": 0, "Message": "Internal error"}, TransientSendError, "the ESP failed"),
        (429, {"ErrorCode": 0, "Message": "Slow down"}, TransientSendError, "the ESP failed"),
    ],
)
def test_anymails_errors_map_onto_transient_and_permanent(esp, user, status, body, error, words):
    url, _seen, answer = esp
    answer["status"], answer["body"] = status, body
    with pytest.raises(error, match=words) as err:
        postmark(url).send(message(user.pk))
    assert "ada@example.com" not in str(err.value)  # anymail quotes the ESP's answer; the error keeps one line


def test_a_hung_esp_is_transient_within_the_send_deadline(esp, user):
    url, _seen, answer = esp
    answer["hang_s"] = 10
    started = time.monotonic()
    with pytest.raises(TransientSendError, match="the ESP failed"):
        postmark(url, timeout_s=30).send(message(user.pk, deadline=time.monotonic() + 0.5))
    assert time.monotonic() - started < 5


def test_a_suppressed_address_is_refused_without_calling_the_esp(esp, user):
    url, seen, _answer = esp
    Suppression.objects.create(address="ADA@example.com".lower(), reason="bounced")
    with pytest.raises(SuppressedRecipient, match="suppressed") as err:
        postmark(url).send(message(user.pk))
    assert err.value.reason == "suppressed"
    assert seen == []


def test_django_email_channel_honours_the_suppression_list_too(user, settings):
    from django.core import mail

    from notifications.channels.email import EmailChannel

    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    Suppression.objects.create(address="ada@example.com", reason="complained")
    with pytest.raises(SuppressedRecipient):
        EmailChannel("email").send(message(user.pk))
    assert mail.outbox == []


def test_an_email_backend_is_required_and_must_import(db):
    from django.core.exceptions import ImproperlyConfigured

    with pytest.raises(ImproperlyConfigured, match="email_backend"):
        AnymailChannel("email")
    with pytest.raises(ImportError):
        AnymailChannel("email", email_backend="anymail.backends.nosuch.EmailBackend")
