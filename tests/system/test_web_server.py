"""The web tier as deployed: the chart's gunicorn command, run for real on loopback, is not frozen by one slow client.

With one sync worker, a client that sent half a request held the only worker: /healthz did not answer until the
client gave up or gunicorn killed the worker. The test runs exactly the command the chart deploys (and the
Dockerfile, which must agree), holds slow connections open, and expects /healthz and ingest to answer meanwhile.
"""

import json
import os
import re
import shlex
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from sluice_tools.processes import ROOT, ManagedProcess
from sluice_tools.redis_server import free_port
from tests.unit.test_chart import FULLNAME, named, render_objects
from tests.waiting import wait_for

ANSWER_WITHIN_S = 5  # /healthz answers in milliseconds; a frozen pod does not answer at all


def deployed_command():
    web = named(render_objects(), "Deployment", f"{FULLNAME}-web")
    container = web["spec"]["template"]["spec"]["containers"][0]
    return container["command"] + container.get("args", [])


def deployed_web(env, make_user_and_token, **options):
    """Migrate the database ``env`` names, run ``make_user_and_token`` (a shell script that prints a user's pk and a
    raw ingest token), and build gunicorn as the chart runs it, on a free port: (the server, not started yet, its
    port, the user's pk, the token)."""
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True, timeout=120)
    made = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", make_user_and_token],
        cwd=ROOT,
        env=env,
        check=True,
        timeout=60,
        capture_output=True,
        text=True,
    )
    user_pk, token = made.stdout.split()[-2:]
    port = free_port()
    command = deployed_command()
    args = [sys.executable, "-m", "gunicorn", *command[1:], "--bind", f"127.0.0.1:{port}"]
    return ManagedProcess("gunicorn", args, env, **options), port, user_pk, token


def test_the_dockerfile_runs_the_same_web_server_as_the_chart():
    cmd = re.search(r"^CMD (\[.*\])$", (ROOT / "Dockerfile").read_text(), re.M)
    assert json.loads(cmd[1]) == deployed_command()


def request(port, path, body=None, token=None):
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=body, headers=headers)
    started = time.monotonic()
    with urllib.request.urlopen(req, timeout=ANSWER_WITHIN_S) as response:
        return response.status, json.loads(response.read()), time.monotonic() - started


def up(port):
    try:
        return request(port, "/healthz")[0] == 200
    except OSError:
        return False


@pytest.mark.timeout(180)
def test_one_slow_client_does_not_freeze_the_web_pod(redis_client, tmp_path):
    env = {
        "DJANGO_SETTINGS_MODULE": "settings",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'web.sqlite3'}",
        "REDIS_URL": os.environ["REDIS_URL"],
    }
    env = {**os.environ, **env}
    assert deployed_command()[0] == "gunicorn"
    server, port, user_pk, token = deployed_web(env, MAKE_USER_AND_TOKEN, ready_text="Listening at")
    server.start()
    slow = []
    try:
        wait_for(lambda: up(port), timeout=60)  # both workers booted: they load Django first
        # A client that sent its headers and half its body, and one that sent half its headers; both stay.
        half_body = socket.create_connection(("127.0.0.1", port))
        half_body.sendall(
            b"POST /api/notifications/ HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
            b"Authorization: Bearer " + token.encode() + b'\r\nContent-Length: 400\r\n\r\n{"user": '
        )
        half_headers = socket.create_connection(("127.0.0.1", port))
        half_headers.sendall(b"GET /healthz HTTP/1.1\r\nHost: loc")
        slow += [half_body, half_headers]
        time.sleep(1.0)  # long enough for both to be read as far as they go
        status, body, took = request(port, "/healthz")
        assert (status, body) == (200, {"status": "ok"}), took
        print(f"/healthz answered in {took * 1000:.0f} ms beside two slow clients")
        event = {"user": int(user_pk), "kind": "task.assigned", "entity_id": "t1"}
        status, body, took = request(port, "/api/notifications/", json.dumps(event).encode(), token)
        assert (status, body) == (202, {"outcome": "accepted"}), took
        print(f"ingest answered 202 in {took * 1000:.0f} ms beside two slow clients")
        assert redis_client.llen("routine") == 1
    finally:
        for sock in slow:
            sock.close()
        server.stop()


def collectstatic_as_the_image_does(env):
    """Run the Dockerfile's collectstatic step (its variables, its command) with ``env``."""
    step = re.search(r"^RUN (.*\bmanage\.py collectstatic\b.*)$", (ROOT / "Dockerfile").read_text(), re.M)
    assert step, "the Dockerfile collects the static files when it builds the image"
    words = shlex.split(step[1])
    assigned = {}
    while "=" in words[0]:
        name, _, value = words.pop(0).partition("=")
        assigned[name] = value
    assert words[0] == "python"
    subprocess.run([sys.executable, *words[1:]], cwd=ROOT, env={**env, **assigned}, check=True, timeout=120)


def fetch(port, path):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=ANSWER_WITHIN_S) as response:
        return response.status, response.headers.get_content_type(), response.read()


@pytest.mark.timeout(180)
def test_the_web_server_serves_the_static_files_the_image_collected(redis_client, tmp_path):
    import django

    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "settings",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'web.sqlite3'}",
        "DJANGO_STATIC_ROOT": str(tmp_path / "staticfiles"),
    }
    collectstatic_as_the_image_does(env)
    assert (tmp_path / "staticfiles" / "sluice" / "inbox" / "bell.js").exists()
    server, port, _user_pk, _token = deployed_web(env, MAKE_USER_AND_TOKEN, ready_text="Listening at")
    server.start()
    try:
        wait_for(lambda: up(port), timeout=60)
        files = {
            "/static/sluice/inbox/bell.js": ROOT / "notifications" / "static" / "sluice" / "inbox" / "bell.js",
            "/static/admin/css/base.css": Path(django.__file__).parent
            / "contrib"
            / "admin"
            / "static"
            / "admin"
            / "css"
            / "base.css",
        }
        for path, source in files.items():
            status, content_type, body = fetch(port, path)
            assert status == 200, path
            assert content_type == ("text/javascript" if path.endswith(".js") else "text/css"), (path, content_type)
            assert body == source.read_bytes(), path
    finally:
        server.stop()


MAKE_USER_AND_TOKEN = """
from django.contrib.auth import get_user_model
from notifications.models import IngestToken
user = get_user_model().objects.create_user("ada", email="ada@example.com")
token = IngestToken(name="billing", kinds=["task.assigned"])
raw = token.set_new_token()
token.save()
print(user.pk, raw)
"""
