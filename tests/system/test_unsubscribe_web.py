"""RFC 8058 against the real WSGI app: the chart's gunicorn command serves Sluice's own project, real workers send
email through a real SMTP server, and the test reads the List-Unsubscribe headers of an email a worker sent, POSTs
List-Unsubscribe=One-Click to its URL with no cookie (200, no redirect), and sees that kind off for that user on
email: the next notify() of it goes out by push only. A GET of the URL, a token edited by one character, another
user's payload under this signature, and a token of a mandatory kind change nothing; a mandatory kind's email has no
header at all."""

import http.client
import json
import os
import sqlite3
import subprocess
import sys
from urllib.parse import urlsplit

import pytest

from notifications import unsubscribe_links as links
from sluice_tools.demo_kinds import DEMO_KINDS
from sluice_tools.processes import ROOT, WorkerProcess
from tests.smtp_capture import smtp_capture
from tests.system.test_web_server import deployed_web, up
from tests.waiting import settled, wait_for

KINDS = {**DEMO_KINDS, "account.security": {"class": "critical", "channels": ["email"], "mandatory": True}}
CHANNELS = {
    "email": {"backend": "notifications.channels.email.EmailChannel"},
    "push": {"backend": "notifications.channels.console.ConsoleChannel"},
    "sms": {"backend": "notifications.channels.console.ConsoleChannel"},
}
MAKE_USERS = """
from django.contrib.auth import get_user_model
User = get_user_model()
ada = User.objects.create_user("ada", email="ada@example.com")
bob = User.objects.create_user("bob", email="bob@example.com")
print(ada.pk, bob.pk)
"""
ONE_CLICK = b"List-Unsubscribe=One-Click"


@pytest.fixture
def smtp():
    with smtp_capture() as server:
        yield server


def call(port, method, path, body=None, headers=None):
    """One request with no cookie, redirects not followed: (status, headers, body)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request(method, path, body=body, headers=headers or {})
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), response.read().decode()
    finally:
        connection.close()


def one_click(port, path):
    return call(port, "POST", path, ONE_CLICK, {"Content-Type": "application/x-www-form-urlencoded"})


def preference_rows(db):
    with sqlite3.connect(db) as connection:
        query = "SELECT user_id, kind, category, channel, mode FROM sluice_notifications_preference ORDER BY id"
        return connection.execute(query).fetchall()


def notifying(env, *events):
    """notify() each (user, kind, entity, title) in a process of the deployed project (its database, its kinds)."""
    lines = ["from notifications import notify"]
    lines += [
        f"notify({user}, {kind!r}, entity_id={entity!r}, payload={{'title': {title!r}}})"
        for user, kind, entity, title in events
    ]
    subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", "\n".join(lines)], cwd=ROOT, env=env, check=True, timeout=60
    )


def header(message, name):
    value = message[name]
    return None if value is None else str(value).strip()


@pytest.mark.timeout(300)
def test_one_click_unsubscribe_from_an_email_a_worker_sent(redis_server, redis_client, smtp, tmp_path, settings):
    controller, received = smtp
    settings.SLUICE_KINDS = KINDS  # this process's token of a mandatory kind, as the web has them
    db = tmp_path / "web.sqlite3"
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "settings",
        "DATABASE_URL": f"sqlite:///{db}",
        "REDIS_URL": redis_server.url,
        "SLUICE_KINDS": json.dumps(KINDS),
        "SLUICE_CHANNELS": json.dumps(CHANNELS),
        "EMAIL_BACKEND": "django.core.mail.backends.smtp.EmailBackend",
        "EMAIL_HOST": controller.hostname,
        "EMAIL_PORT": str(controller.port),
    }
    server, port, ada, bob = deployed_web(env, MAKE_USERS, ready_text="Listening at")
    ada, bob = int(ada), int(bob)
    site = f"http://127.0.0.1:{port}"
    env["SLUICE_SITE_URL"] = site  # the workers have no request: the links are absolute on it
    workers = [WorkerProcess(klass, redis_server.url, env=env) for klass in ("critical", "routine")]
    server.start()
    try:
        for worker in workers:
            worker.start()
        wait_for(lambda: up(port), timeout=60, what="gunicorn up")
        routine = workers[1]
        addresses = {ada: "ada@example.com", bob: "bob@example.com"}
        to = lambda user: [m for m in received if m["To"] == addresses[user]]  # noqa: E731

        # An email of a kind that is not mandatory, sent by a worker, for each user.
        notifying(env, (ada, "task.assigned", "t1", "Budget review"), (bob, "task.assigned", "t1", "Budget review"))
        wait_for(lambda: len(to(ada)) == 1 and len(to(bob)) == 1, timeout=60, what="the two emails")
        [email_ada], [email_bob] = to(ada), to(bob)
        assert header(email_ada, "List-Unsubscribe-Post") == "List-Unsubscribe=One-Click"
        listed = header(email_ada, "List-Unsubscribe")
        assert listed.startswith(f"<{site}/api/u/"), listed
        assert listed.endswith("/>"), listed
        url = urlsplit(listed[1:-1])
        theirs = urlsplit(header(email_bob, "List-Unsubscribe")[1:-1])
        assert url.path != theirs.path
        html = email_ada.get_body(("html",)).get_content()
        assert listed[1:-1] in html  # the visible link in its footer

        # A GET (a mail scanner following the link) changes nothing.
        status, _headers, page = call(port, "GET", url.path)
        assert status == 200
        assert 'name="List-Unsubscribe" value="One-Click"' in page
        assert preference_rows(db) == []

        # A token edited by one character, and bob's payload under ada's signature, change nothing.
        token = url.path.removeprefix("/api/u/").rstrip("/")
        middle = len(token) // 2
        edited = token[:middle] + ("A" if token[middle] != "A" else "B") + token[middle + 1 :]
        forged = theirs.path.removeprefix("/api/u/").split(":")[0] + ":" + ":".join(token.split(":")[1:])
        for bad in (edited, forged):
            status, _headers, _page = one_click(port, f"/api/u/{bad}/")
            assert status == 400, bad
        # A token of a mandatory kind (signed with the project's key, as no email of it ever carries) changes nothing.
        mandatory = links.token(ada, "email", [("account.security", "")])
        assert one_click(port, f"/api/u/{mandatory}/")[0] == 400
        assert preference_rows(db) == []

        # The one click: no cookie, 200, no redirect; that kind off for that user on email, and only that.
        status, headers, page = one_click(port, url.path)
        assert status == 200, page
        assert "Location" not in headers
        assert "You are unsubscribed" in page
        assert preference_rows(db) == [(ada, "task.assigned", "", "email", "off")]

        # The next notify() of it goes out by push, not by email; bob, who did not click, still gets his email.
        pushes = routine.output().count("[push] routine    task.assigned")
        notifying(env, (ada, "task.assigned", "t2", "Roadmap"), (bob, "task.assigned", "t2", "Roadmap"))
        wait_for(lambda: routine.output().count("[push] routine    task.assigned") == pushes + 2, what="two pushes")
        wait_for(lambda: len(to(bob)) == 2, what="bob's second email")
        wait_for(lambda: settled("routine"), what="every send acked")
        assert len(to(ada)) == 1

        # A mandatory kind's email carries no unsubscribe header.
        notifying(env, (ada, "account.security", "s1", "New sign-in"))
        wait_for(lambda: len(to(ada)) == 2, what="the mandatory email")
        security = to(ada)[-1]
        assert header(security, "X-Sluice-Kind") == "account.security"
        assert header(security, "List-Unsubscribe") is None
        assert header(security, "List-Unsubscribe-Post") is None
        assert "cannot be turned off" in security.get_body(("plain",)).get_content()
    finally:
        for worker in reversed(workers):
            worker.stop()
        server.stop()
