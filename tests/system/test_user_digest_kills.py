"""One digest per user, exactly once: 200 users x 5 keys under 4 concurrent flushers, 2 of them killed mid-flush.
Every event is in exactly one published digest, each user's keys in one message, none twice, none missing."""

import json
import os
import signal
import subprocess
import sys
import textwrap
from collections import Counter, defaultdict

import pytest

from digest.flush import run_flush
from pipeline.redis import keys
from sluice_tools.processes import ROOT
from tests.digest_helpers import fold, published
from tests.waiting import wait_for

pytestmark = pytest.mark.django_db  # the final flushes rebuild the preferences' mirror from the database

USERS, KEYS_PER_USER = 200, 5

# A flusher process: it waits for the start, then flushes in small batches (5 users a claim) with a short lease.
# KILL_AT="claim:N" dies once its Nth claim is held, before publishing it; "publish:N" right after its Nth user
# group went out, before the next group and before the claim is released. Either way, its claims stay behind.
FLUSHER = textwrap.dedent(
    """
    import os, signal, time, django
    django.setup()
    from digest import flush, user_claims
    from pipeline.connections import get_redis

    kill_at = os.environ.get("KILL_AT", "")
    step, _, n = kill_at.partition(":")
    calls = {"claim": 0, "publish": 0}

    def counted(name, real, before):
        def wrapper(*args, **kwargs):
            calls[name] += 1
            if before and step == name and calls[name] == int(n):
                os.kill(os.getpid(), signal.SIGKILL)
            result = real(*args, **kwargs)
            if not before and step == name and calls[name] == int(n):
                os.kill(os.getpid(), signal.SIGKILL)
            return result
        return wrapper

    # Dies with the claim held but nothing of it published; or between two groups' publishes.
    user_claims.claim_users = counted("claim", user_claims.claim_users, before=False)
    user_claims.publish_group = counted("publish", user_claims.publish_group, before=False)
    client = get_redis()
    client.incr("test:ready")
    while not client.exists("test:go"):
        time.sleep(0.01)
    published = flush._flush_store(client, ("routine", "background"), "test", 25, 2, set())
    print(published, flush=True)
    """
)


@pytest.mark.timeout(120)
def test_200_users_under_4_flushers_with_2_killed_each_get_one_digest(redis_client, redis_server, settings):
    settings.SLUICE_QUEUES = {"routine": {"capacity": 100_000}}  # room for every message: this is about races
    events = {}
    for user in range(USERS):
        for key in range(KEYS_PER_USER):
            entity = f"e{key}"
            events[user, entity] = 1 + (user + key) % 4
            for i in range(events[user, entity]):
                fold(user, entity_id=entity, payload={"title": entity, "i": i}, max_keys=10**6)
    env = {
        **os.environ,
        "REDIS_URL": redis_server.url,
        "DJANGO_SETTINGS_MODULE": "settings",
        "SLUICE_QUEUES": json.dumps({"routine": {"capacity": 100_000}}),
    }
    kills = ["claim:2", "publish:3", "", ""]
    flushers = [
        subprocess.Popen(
            [sys.executable, "-c", FLUSHER], cwd=ROOT, env={**env, "KILL_AT": kill}, stdout=subprocess.PIPE, text=True
        )
        for kill in kills
    ]
    # All four start together, so they race over the same pending keys.
    wait_for(lambda: redis_client.get("test:ready") == b"4", timeout=60, what="the four flushers ready")
    redis_client.set("test:go", 1)
    for flusher in flushers:
        flusher.communicate(timeout=60)
    codes = [flusher.returncode for flusher in flushers]
    assert codes[:2] == [-signal.SIGKILL, -signal.SIGKILL]
    assert codes[2:] == [0, 0]
    # The killed flushers' claims are taken over once their 2 s leases end.
    wait_for(
        lambda: (
            run_flush("final") is not None
            and redis_client.zcard(keys.claims()) == 0
            and redis_client.zcard(keys.pending()) == 0
        ),
        timeout=30,
        what="the dead flushers' claims taken over",
    )
    redis_client.delete("test:go", "test:ready")

    messages = published(redis_client)
    seen = Counter()
    per_user = defaultdict(list)
    for message in messages:
        flush_id = message["notification_id"].split("-")[1]
        per_user[message["user_id"]].append(flush_id)
        if "digest" in message:
            assert message["digest"]["more"] == 0
            for item in message["digest"]["items"]:
                seen[message["user_id"], item["entity_id"]] += item["count"]
        else:
            seen[message["user_id"], message["entity_id"]] += message["count"]
    duplicated = {k: n - events[k] for k, n in seen.items() if n > events.get(k, 0)}
    missing = {k: n - seen[k] for k, n in events.items() if seen[k] < n}
    assert (duplicated, missing) == ({}, {})
    assert sum(seen.values()) == sum(events.values())
    # One digest per user per flush: every user's five keys went out in one message.
    assert {user: len(ids) for user, ids in per_user.items()} == dict.fromkeys(range(USERS), 1)
    assert len({m["notification_id"] for m in messages}) == len(messages) == USERS
    assert redis_client.hget(keys.fold_store_size(), "k") in (b"0", None)
