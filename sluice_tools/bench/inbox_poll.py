"""The inbox's unread-count poll through the web tier as deployed (gunicorn, Sluice's settings), one web process:
polls a second and latency of GET /api/inbox/unread/ (200, and 304 with If-None-Match), side by side with /healthz
(no session, no Redis) in the same run; sessions in the database, Django's default."""

import http.client
import json
import os
import statistics
import subprocess
import sys
import threading
import time

from sluice_tools.processes import ROOT, ManagedProcess
from sluice_tools.redis_server import free_port

MAKE_SESSION = """
import json, uuid
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.sessions.backends.db import SessionStore
from notifications.channels.base import Message
from notifications.inbox.channel import InboxChannel
from pipeline.conf import sluice_settings
User = get_user_model()
user, _ = User.objects.get_or_create(username="bench-inbox", defaults={"email": "inbox@example.com"})
kind = sorted(sluice_settings().kinds)[0]
for i in range(5):
    InboxChannel("inbox").send(Message(uuid.uuid4().hex, "inbox", kind, "", user.pk, f"e{i}", "", "", payload={}))
session = SessionStore()
session["_auth_user_id"] = str(user.pk)
session["_auth_user_backend"] = settings.AUTHENTICATION_BACKENDS[0]
session["_auth_user_hash"] = user.get_session_auth_hash()
session.create()
print(json.dumps({"session": session.session_key}))
"""


def _polls(port, path, headers, seconds, clients):
    """``clients`` threads, each on one keep-alive connection, GET ``path`` for ``seconds``: (statuses, latencies)."""
    latencies, statuses, lock = [], {}, threading.Lock()
    stop = time.monotonic() + seconds

    def client():
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        mine, codes = [], {}
        while time.monotonic() < stop:
            started = time.perf_counter()
            connection.request("GET", path, headers=headers)
            response = connection.getresponse()
            response.read()
            mine.append(time.perf_counter() - started)
            codes[response.status] = codes.get(response.status, 0) + 1
        connection.close()
        with lock:
            latencies.extend(mine)
            for code, n in codes.items():
                statuses[code] = statuses.get(code, 0) + n

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return statuses, latencies


def _figures(statuses, latencies, seconds):
    cuts = statistics.quantiles(latencies, n=100)
    return {
        "polls_per_s": round(len(latencies) / seconds, 1),
        "p50_ms": round(statistics.median(latencies) * 1000, 2),
        "p99_ms": round(cuts[98] * 1000, 2),
        "statuses": {str(code): n for code, n in sorted(statuses.items())},
    }


def _serve(env, port):
    return ManagedProcess(
        "gunicorn-bench-inbox",
        [
            sys.executable,
            "-m",
            "gunicorn",
            "-c",
            "python:settings.gunicorn",
            "settings.wsgi",
            "--workers",
            "1",
            "--bind",
            f"127.0.0.1:{port}",
        ],
        env,
        ready_text="Listening at",
    ).start()


def run(redis_url, out, seconds=10.0, clients=8):
    """Start one gunicorn process; poll /healthz, the count, and the count with its ETag, ``seconds`` each."""
    channels = {name: {"backend": "notifications.channels.console.ConsoleChannel"} for name in ("email", "sms", "push")}
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "settings",
        "REDIS_URL": redis_url,
        "DJANGO_SECURE_COOKIES": "0",
        "SLUICE_LOG_LEVEL": "WARNING",
        "SLUICE_CHANNELS": json.dumps({**channels, "inbox": {"backend": "notifications.inbox.channel.InboxChannel"}}),
    }
    made = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", MAKE_SESSION],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    cookie = {"Cookie": f"sessionid={json.loads(made.stdout.strip().splitlines()[-1])['session']}"}
    port = free_port()
    server = _serve(env, port)
    try:
        _polls(port, "/healthz", {}, 1.0, clients)  # warm up: imports, connections
        runs = {"healthz": _figures(*_polls(port, "/healthz", {}, seconds, clients), seconds)}
        runs["unread_200"] = _figures(*_polls(port, "/api/inbox/unread/", cookie, seconds, clients), seconds)
        conditional = {**cookie, "If-None-Match": _etag(port, cookie)}
        runs["unread_304"] = _figures(*_polls(port, "/api/inbox/unread/", conditional, seconds, clients), seconds)
    finally:
        server.stop()
    result = {"seconds_each": seconds, "clients": clients, "web_processes": 1, "session_backend": "db", **runs}
    result["unread_vs_healthz_rate"] = round(runs["unread_200"]["polls_per_s"] / runs["healthz"]["polls_per_s"], 2)
    return result


def _etag(port, headers):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    connection.request("GET", "/api/inbox/unread/", headers=headers)
    response = connection.getresponse()
    response.read()
    connection.close()
    return response.getheader("ETag")
