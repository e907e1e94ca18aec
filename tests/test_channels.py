"""Channel backends against real servers: SMTP (aiosmtpd) for email, a local HTTP server for webhooks."""

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from notifications.channels.base import Message, PermanentSendError, TransientSendError
from notifications.channels.console import ConsoleChannel
from notifications.channels.email import EmailChannel
from notifications.channels.webhook import WebhookChannel
from sluice_tools.redis_server import free_port


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
    from aiosmtpd.controller import Controller

    received = []

    class Handler:
        async def handle_DATA(self, server, session, envelope):
            received.append(envelope)
            return "250 OK"

    controller = Controller(Handler(), hostname="127.0.0.1", port=free_port())
    controller.start()
    yield controller, received
    controller.stop()


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


def test_webhook_posts_signed_json(http_server):
    url, requests, _ = http_server
    WebhookChannel("webhook", url=url, secret="s3cret").send(message())
    headers, body = requests[0]
    assert body["id"] == "n1"
    assert body["payload"] == {"a": 1}
    assert headers["Idempotency-Key"] == "n1"
    assert len(headers["X-Sluice-Signature"]) == 64


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
