"""Channel backends against real servers: SMTP (aiosmtpd) for email, a local HTTP server for webhooks."""

import hashlib
import hmac
import json
import threading
import time
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from notifications.channels.base import Message, PermanentSendError, TransientSendError
from notifications.channels.console import ConsoleChannel
from notifications.channels.email import EmailChannel
from notifications.channels.webhook import WebhookChannel, sign
from sluice_tools.redis_server import free_port
from tests.smtp_capture import smtp_capture


def message(user_id=1, **overrides):
    fields = dict(
        id="n1",
        channel="x",
        kind="task.assigned",
        klass="routine",
        user_id=user_id,
        entity_id="t1",
        subject="Task assigned: Q3",
        body="Q3 was assigned to you.",
        payload={"a": 1},
    )
    return Message(**{**fields, **overrides})


@pytest.fixture
def smtp_server():
    with smtp_capture(parse=False) as server:
        yield server


def test_email_goes_through_smtp(smtp_server, user, settings):
    controller, received = smtp_server
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = controller.hostname, controller.port
    EmailChannel("email", from_email="sluice@example.com").send(message(user.pk))
    assert len(received) == 1
    assert received[0].rcpt_tos == ["ada@example.com"]
    text = received[0].content.decode()
    assert "Subject: Task assigned: Q3" in text
    assert "X-Sluice-Id: n1" in text


def test_email_headers_are_one_line_whatever_the_subject_holds(smtp_server, user, settings):
    # A \r in a payload value that reaches the subject made Django refuse the header at every attempt.
    controller, received = smtp_server
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = controller.hostname, controller.port
    hostile = "Q3\r\nBcc: victim@example.com\x1b[31m red\u2028next"
    EmailChannel("email", from_email="sluice@example.com").send(message(user.pk, subject=hostile))
    (envelope,) = received
    assert envelope.rcpt_tos == ["ada@example.com"]
    text = envelope.content.decode()
    assert "Subject: Q3 Bcc: victim@example.com red next" in text
    assert "\x1b" not in text


def test_email_without_address_is_a_permanent_failure(db, django_user_model):
    nobody = django_user_model.objects.create_user("noaddress")
    with pytest.raises(PermanentSendError, match="no email address"):
        EmailChannel("email").send(message(nobody.pk))


def test_email_to_a_dead_server_is_transient(user, settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", free_port()
    with pytest.raises(TransientSendError, match="SMTP failed"):
        EmailChannel("email").send(message(user.pk))


@pytest.fixture
def http_server():
    requests, statuses = [], []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers["Content-Length"]))
            requests.append((dict(self.headers), json.loads(body)))
            self.send_response(statuses.pop(0) if statuses else 204)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/hook", requests, statuses
    server.shutdown()
    server.server_close()


def test_webhook_posts_json_signed_with_a_timestamp(http_server):
    url, requests, _ = http_server
    before = int(time.time())
    WebhookChannel("webhook", url=url, secret="s3cret").send(message())
    headers, body = requests[0]
    assert body["id"] == "n1"
    assert body["payload"] == {"a": 1}
    assert headers["Idempotency-Key"] == "n1"
    # What a receiver does (docs/security.md): recompute over "<timestamp>." + the raw body, compare in constant
    # time, and refuse a timestamp outside its window.
    timestamp = headers["X-Sluice-Timestamp"]
    assert before <= int(timestamp) <= time.time() + 1
    raw = json.dumps(body).encode()
    expected = "v1=" + hmac.new(b"s3cret", f"{timestamp}.".encode() + raw, hashlib.sha256).hexdigest()
    assert hmac.compare_digest(headers["X-Sluice-Signature"], expected)
    # The body alone, or another timestamp, does not verify: a captured request cannot be replayed later.
    assert headers["X-Sluice-Signature"] != "v1=" + hmac.new(b"s3cret", raw, hashlib.sha256).hexdigest()
    assert headers["X-Sluice-Signature"] != sign("s3cret", str(int(timestamp) + 600), raw)


def test_webhook_without_a_secret_is_not_signed(http_server):
    url, requests, _ = http_server
    WebhookChannel("webhook", url=url).send(message())
    assert "X-Sluice-Signature" not in requests[0][0]


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_webhook_never_follows_a_redirect(status):
    gets = []

    class Redirecting(BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(status)
            self.send_header("Location", "/elsewhere")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_GET(self):
            gets.append(self.path)
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    with serving(Redirecting) as url:
        with pytest.raises(PermanentSendError, match=f"{status}; redirects are not followed"):
            WebhookChannel("webhook", url=url).send(message())
    assert gets == []  # the POST never became a GET counted as delivered


@pytest.mark.timeout(30)
def test_webhook_timeout_bounds_the_whole_send(http_server):
    class Trickling(BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            # A byte every 0.3 s: each read is well inside any socket timeout, the whole answer never ends.
            for byte in b"HTTP/1.1 200 OK\r\nX-Slow: " + b"a" * 200:
                self.wfile.write(bytes([byte]))
                self.wfile.flush()
                time.sleep(0.3)  # the trickle's pace: the test is about a reply that never ends

        def log_message(self, *args):
            pass

    with serving(Trickling) as url:
        started = time.monotonic()
        with pytest.raises(TransientSendError, match="took longer than 1 s"):
            WebhookChannel("webhook", url=url, timeout_s=1).send(message())
        took = time.monotonic() - started
    print(f"a trickling receiver held a send with timeout_s=1 for {took:.2f} s")
    assert took < 5  # about the 1 s asked for; per-read timeouts alone would run for a minute


@contextmanager
def serving(handler):
    from http.server import ThreadingHTTPServer

    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/hook"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize(
    ("status", "error"), [(500, TransientSendError), (429, TransientSendError), (400, PermanentSendError)]
)
def test_webhook_errors_are_classified(http_server, status, error):
    url, _, statuses = http_server
    statuses.append(status)
    with pytest.raises(error, match=str(status)):
        WebhookChannel("webhook", url=url).send(message())


def test_webhook_needs_a_url():
    with pytest.raises(ValueError, match=r"\['options'\]\['url'\] is required"):
        WebhookChannel("webhook")


def test_console_prints_a_line_without_the_payload(capfd):
    ConsoleChannel("sms").send(message(payload={"secret": "hunter2"}, count=3))
    out = capfd.readouterr().out  # written to the process's real stdout, file descriptor 1
    assert out.startswith("[sms] routine")
    assert "x3" in out
    assert "hunter2" not in out
