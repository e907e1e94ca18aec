"""The forged-bounce reproduction against the real WSGI app: the chart's gunicorn command, Sluice's own settings.

One unauthenticated Postmark-format bounce, and one SendGrid-format request of 5,000 bounces, are refused and
change nothing; the same 5,000 with the secret apply at most SLUICE_TRACKING_MAX_EVENTS and suppress no one Sluice
never sent to; a genuine signed bounce for an address Sluice sent to still suppresses it.
"""

import base64
import json
import os
import sqlite3
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from sluice_tools.processes import ROOT, ManagedProcess
from sluice_tools.redis_server import free_port
from tests.integration.test_security_webhooks import SECRET, bounce, esp_provider, sendgrid_bounces
from tests.system.test_web_server import deployed_command, up
from tests.waiting import wait_for

RECORD_A_SEND = """
from django.contrib.auth import get_user_model
from notifications.channels.base import Message
from notifications.delivery.records import record_sent
user = get_user_model().objects.create_user("ada", email="ada@example.com")
message = Message(id="n1", channel="email", kind="login.code", klass="critical", user_id=user.pk, entity_id="e",
                  subject="", body="")
assert record_sent(message, "postmark", "pm-1", "ada@example.com")
"""


def post(port, esp, body, secret=None):
    headers = {"Content-Type": "application/json"}
    if secret:
        headers["Authorization"] = "Basic " + base64.b64encode(secret.encode()).decode()
    data = json.dumps(body).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/api/anymail/{esp}/tracking/", data=data, headers=headers)
    started = time.monotonic()
    try:
        with urllib.request.urlopen(req, timeout=60) as response:
            status = response.status
    except urllib.error.HTTPError as exc:
        status = exc.code
    return status, len(data), time.monotonic() - started


def rows(database, table):
    with sqlite3.connect(database) as db:
        return db.execute(f"SELECT count(*) FROM sluice_notifications_{table}").fetchone()[0]


@pytest.mark.timeout(240)
@pytest.mark.expected_errors(r"django\.security\.AnymailWebhookValidationFailure", r"Bad Request")
def test_forged_bounces_against_the_wsgi_app(redis_client, tmp_path):
    database = tmp_path / "web.sqlite3"
    channels = {
        "email": {"providers": [esp_provider("postmark"), esp_provider("sendgrid")]},
        "sms": {"backend": "notifications.channels.console.ConsoleChannel"},
        "push": {"backend": "notifications.channels.console.ConsoleChannel"},
    }
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "settings",
        "DATABASE_URL": f"sqlite:///{database}",
        "REDIS_URL": os.environ["REDIS_URL"],
        "SLUICE_CHANNELS": json.dumps(channels),
        "ANYMAIL_WEBHOOK_SECRET": SECRET,
        "PYTHONWARNINGS": "ignore::DeprecationWarning",
    }
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True, timeout=120)
    subprocess.run([sys.executable, "manage.py", "shell", "-c", RECORD_A_SEND], cwd=ROOT, env=env, check=True)
    port = free_port()
    command = deployed_command()
    server = ManagedProcess(
        "gunicorn",
        [sys.executable, "-m", "gunicorn", *command[1:], "--bind", f"127.0.0.1:{port}"],
        env,
        ready_text="Listening at",
    ).start()
    try:
        assert wait_for(lambda: up(port), timeout=60)
        status, size, took = post(port, "postmark", bounce("alice@victim.example", "pm-x", None))
        print(f"unauthenticated Postmark bounce: {status} in {took * 1000:.0f} ms")
        assert status == 400
        flood = sendgrid_bounces(5000)
        status, size, took = post(port, "sendgrid", flood)
        print(f"unauthenticated SendGrid request of 5,000 bounces ({size // 1024} KiB): {status} in {took:.2f} s")
        assert status == 400
        assert (rows(database, "suppression"), rows(database, "delivery")) == (0, 1)  # the genuine send's only
        status, size, took = post(port, "sendgrid", flood, secret=SECRET)
        print(f"authenticated SendGrid request of 5,000 bounces Sluice never sent: {status} in {took:.2f} s")
        assert status == 200
        assert (rows(database, "suppression"), rows(database, "delivery")) == (0, 1)
        status, size, took = post(port, "postmark", bounce("ada@example.com"), secret=SECRET)
        print(f"genuine Postmark bounce of a send to ada@example.com: {status} in {took * 1000:.0f} ms")
        assert status == 200
        assert rows(database, "suppression") == 1
    finally:
        server.stop()
    counters = {k.decode(): int(v) for k, v in redis_client.hgetall("sluice:counters").items()}
    tracking = {k: v for k, v in counters.items() if k.startswith("tracking_events:")}
    print("counters:", tracking)
    assert tracking["tracking_events:sendgrid:over_cap"] == 4500
    assert tracking["tracking_events:sendgrid:unmatched"] == 500
