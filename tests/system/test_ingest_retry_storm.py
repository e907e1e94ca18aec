"""An ingest retry storm: 2,000 requests, each sent twice with the same Idempotency-Key, concurrently, to the web
server the chart deploys, with a real worker delivering: every key is delivered exactly once.

The clients send each request's two copies back to back from a shared queue, so the two usually race in two client
threads (and two gunicorn threads or workers); admission's one Lua step decides which one publishes. The simulated
provider records every send in Redis, so "exactly once" is counted, not assumed.
"""

import json
import os
import queue
import threading
import time
import urllib.error
import urllib.request
from collections import Counter

import pytest

from pipeline.redis import keys
from sluice_tools.bench.provider import sent_records
from sluice_tools.processes import WorkerProcess
from tests.waiting import wait_for

from .test_reliability_worker import KINDS, UNACKED, channels
from .test_web_server import deployed_web, up

REQUESTS = 2000
CLIENTS = 8
KIND = "task.assigned"
SERVICE = "storm"
# Room for every request: the storm measures duplicates, not the class's answer to a full queue.
QUEUES = {"routine": {"capacity": 3 * REQUESTS, "wait_ms": 0}}

MAKE_USER_AND_TOKEN = f"""
from django.contrib.auth import get_user_model
from notifications.models import IngestToken
user = get_user_model().objects.create_user("ada", email="ada@example.com")
token = IngestToken(name="storm", service="{SERVICE}", kinds=["{KIND}"], reveal_details=True, rate_per_second=10000,
                    burst=10000)
raw = token.set_new_token()
token.save()
print(user.pk, raw)
"""


def post(port, token, body, key):
    """One request; its status, body and whether it was answered as a replay. A connection refused or reset (a
    loaded loopback) is sent again, as a client retrying with the same key would."""
    started = time.monotonic()
    status, answer, replayed = _post(port, token, body, key)
    return status, answer, replayed, (started, time.monotonic())


def _post(port, token, body, key):
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {token}", "Idempotency-Key": key}
    request = urllib.request.Request(f"http://127.0.0.1:{port}/api/notifications/", data=body, headers=headers)
    for attempt in range(5):
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, response.read(), response.headers.get("Idempotent-Replayed") == "true"
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read(), exc.headers.get("Idempotent-Replayed") == "true"
        except (ConnectionError, urllib.error.URLError):
            if attempt == 4:
                raise
    raise AssertionError("unreachable")


@pytest.mark.timeout(600)
def test_every_key_of_a_retry_storm_is_delivered_exactly_once(redis_client, redis_server, tmp_path):
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "settings",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'web.sqlite3'}",
        "REDIS_URL": redis_server.url,
        "SLUICE_KINDS": json.dumps(KINDS),
        "SLUICE_QUEUES": json.dumps(QUEUES),
        "SLUICE_CHANNELS": json.dumps(channels(1)),
    }
    server, port, user_pk, token = deployed_web(env, MAKE_USER_AND_TOKEN)
    worker = WorkerProcess(
        "routine",
        redis_server.url,
        channels(1),
        env={k: env[k] for k in ("SLUICE_KINDS", "SLUICE_QUEUES", "DATABASE_URL")},
    )
    server.start()
    worker.start()
    try:
        wait_for(lambda: up(port), timeout=60)
        work = queue.Queue()
        for n in range(REQUESTS):
            body = json.dumps({"user": int(user_pk), "kind": KIND, "entity_id": f"e{n}"}).encode()
            work.put((n, body))
            work.put((n, body))  # the retry, right behind: usually in flight beside the first
        answers = [[] for _ in range(REQUESTS)]

        def client():
            while True:
                try:
                    n, body = work.get_nowait()
                except queue.Empty:
                    return
                answers[n].append(post(port, token, body, f"storm-key-{n}"))

        threads = [threading.Thread(target=client) for _ in range(CLIENTS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=300)
        assert not any(thread.is_alive() for thread in threads), "the clients did not finish"

        # Both copies answered alike, 202 accepted; exactly one of each pair as a replay.
        for n, pair in enumerate(answers):
            assert len(pair) == 2, (n, pair)
            assert [(status, body) for status, body, _, _ in pair] == [(202, b'{"outcome": "accepted"}')] * 2, (n, pair)
            assert sorted(replayed for _, _, replayed, _ in pair) == [False, True], (n, pair)
        # The two copies of a request were in flight at once (what makes it a race, not a plain repeat).
        raced = sum(1 for (*_, (s1, e1)), (*_, (s2, e2)) in answers if s1 < e2 and s2 < e1)
        assert raced > 0, "no request's two copies were ever in flight together"

        def delivered():
            return len(sent_records(redis_client)) >= REQUESTS and not redis_client.llen("routine")

        wait_for(delivered, timeout=240, what=lambda: f"{len(sent_records(redis_client))} of {REQUESTS} sent")
        wait_for(lambda: not redis_client.hlen(UNACKED), timeout=60, what="the worker's acks")
        sends = Counter(record["entity_id"] for record in sent_records(redis_client))
        assert set(sends) == {f"{SERVICE}:e{n}" for n in range(REQUESTS)}
        assert set(sends.values()) == {1}, {entity: count for entity, count in sends.items() if count != 1}
        assert len(list(redis_client.scan_iter(match=keys.idempotency_pattern(), count=1000))) == REQUESTS
        print(
            f"{2 * REQUESTS} requests, {REQUESTS} keys ({raced} pairs in flight together): "
            f"{len(sends)} delivered, once each"
        )
    finally:
        worker.stop()
        server.stop()
