"""What one PUT /api/preferences/ costs the web tier as deployed (gunicorn, Sluice's settings): Redis commands
(INFO commandstats) and time for a 64 KiB body of repeated rows and for the largest body of distinct rows, then
16 such 64 KiB PUTs at once by 16 users, ROUNDS times, while /healthz is polled; and 8 valid PUTs at once by one
user (one user's PUTs take turns: none may fail)."""

import json
import os
import secrets
import statistics
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import redis

from sluice_tools.processes import ROOT, ManagedProcess
from sluice_tools.redis_server import free_port

USERS = 18  # one for the single PUTs, 16 at once, and one whose own PUTs go at once
BODY_BYTES = 64 * 1024
CONCURRENT = 16
HEALTHZ_EVERY_S = 0.02
ROUNDS = 5
SAME_USER = 8
HEALTHZ_TIMEOUT_S = 60

MAKE_SESSIONS = """
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.sessions.backends.db import SessionStore
from pipeline.conf import sluice_settings
User = get_user_model()
keys = []
for i in range({users}):
    user, _ = User.objects.get_or_create(username=f"bench-prefs-{{i}}", defaults={{"email": f"p{{i}}@example.com"}})
    session = SessionStore()
    session["_auth_user_id"] = str(user.pk)
    session["_auth_user_backend"] = settings.AUTHENTICATION_BACKENDS[0]
    session["_auth_user_hash"] = user.get_session_auth_hash()
    session.create()
    keys.append(session.session_key)
print(json.dumps({{"sessions": keys, "kinds": sorted(sluice_settings().kinds)}}))
"""


def repeated_rows_body():
    """About 64 KiB of rows that all name one scope (every kind, every channel), alternating their mode."""
    rows, size = [], 20
    while size < BODY_BYTES - 40:
        row = {"mode": "digest" if len(rows) % 2 else "off"}
        rows.append(row)
        size += len(json.dumps(row)) + 2
    return json.dumps({"preferences": rows}).encode()


def distinct_rows_body(kinds):
    return json.dumps({"preferences": [{"kind": kind, "mode": "instant"} for kind in kinds]}).encode()


def put(port, session, body):
    csrf = secrets.token_hex(16)  # Django compares the cookie's CSRF secret with the header's
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/api/preferences/",
        data=body,
        method="PUT",
        headers={
            "Content-Type": "application/json",
            "Cookie": f"sessionid={session}; csrftoken={csrf}",
            "X-CSRFToken": csrf,
        },
    )
    started = time.monotonic()
    try:
        with urllib.request.urlopen(request, timeout=300) as response:
            status = response.status
    except urllib.error.HTTPError as exc:
        status = exc.code
    return status, time.monotonic() - started


def healthz(port):
    started = time.monotonic()
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=HEALTHZ_TIMEOUT_S) as response:
        response.read()
    return time.monotonic() - started


def commands(client):
    return sum(stat["calls"] for stat in client.info("commandstats").values())


def measured_put(port, client, session, body):
    client.config_resetstat()
    status, took = put(port, session, body)
    return {"status": status, "seconds": round(took, 3), "redis_commands": commands(client) - 1, "bytes": len(body)}


def run(redis_url, out):
    """Start gunicorn on ``redis_url`` and the configured DATABASE_URL; return the figures."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "settings",
        "REDIS_URL": redis_url,
        "DJANGO_SECURE_COOKIES": "0",
        "SLUICE_LOG_LEVEL": "WARNING",
    }
    made = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", "import json\n" + MAKE_SESSIONS.format(users=USERS)],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    made = json.loads(made.stdout.strip().splitlines()[-1])
    sessions, kinds = made["sessions"], made["kinds"]
    port = free_port()
    server = ManagedProcess(
        "gunicorn-bench",
        [
            sys.executable,
            "-m",
            "gunicorn",
            "-c",
            "python:settings.gunicorn",
            "settings.wsgi",
            "--bind",
            f"127.0.0.1:{port}",
        ],
        env,
        ready_text="Listening at",
    ).start()
    client = redis.Redis.from_url(redis_url)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                healthz(port)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        repeated, distinct = repeated_rows_body(), distinct_rows_body(kinds)
        result = {
            "put_64k_repeated_rows": measured_put(port, client, sessions[0], repeated),
            "put_distinct_rows": {**measured_put(port, client, sessions[0], distinct), "rows": len(kinds)},
        }
        out.write(f"one 64 KiB PUT: {result['put_64k_repeated_rows']}\n")
        out.write(f"one PUT of {len(kinds)} distinct rows: {result['put_distinct_rows']}\n")
        latencies, done = [], threading.Event()

        def poll():
            while not done.is_set():
                try:
                    latencies.append(healthz(port))
                except OSError:  # no answer within healthz()'s timeout: counted as that long
                    latencies.append(HEALTHZ_TIMEOUT_S)
                done.wait(HEALTHZ_EVERY_S)

        poller = threading.Thread(target=poll, daemon=True)
        poller.start()
        started, answers = time.monotonic(), []
        with ThreadPoolExecutor(CONCURRENT) as pool:
            for _round in range(ROUNDS):
                answers += pool.map(lambda s: put(port, s, repeated), sessions[1 : 1 + CONCURRENT])
        took = time.monotonic() - started
        done.set()
        poller.join()
        result["concurrent_64k_puts"] = {
            "puts_at_once": CONCURRENT,
            "rounds": ROUNDS,
            "statuses": sorted({str(status): [s for s, _ in answers].count(status) for status, _ in answers}.items()),
            "seconds": round(took, 3),
            "healthz_max_ms": round(max(latencies) * 1000, 1),
            "healthz_median_ms": round(statistics.median(latencies) * 1000, 1),
            "healthz_p90_ms": round(statistics.quantiles(latencies, n=10)[-1] * 1000, 1),
            "healthz_polls": len(latencies),
        }
        out.write(f"{CONCURRENT} 64 KiB PUTs at once, {ROUNDS} times: {result['concurrent_64k_puts']}\n")
        with ThreadPoolExecutor(SAME_USER) as pool:
            same = list(pool.map(lambda _: put(port, sessions[-1], distinct), range(SAME_USER)))
        result["same_user_puts_at_once"] = {
            "puts": SAME_USER,
            "statuses": sorted({str(status): [s for s, _ in same].count(status) for status, _ in same}.items()),
        }
        out.write(f"{SAME_USER} valid PUTs at once by one user: {result['same_user_puts_at_once']}\n")
    finally:
        server.stop()
    return result
