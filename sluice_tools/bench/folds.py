"""bench folds: 100,000 distinct entity ids against full queues. The fold store stays under its bound (coarser
folds, then refusals), every call is accounted for, and once Redis itself is full ingest answers 503, not 500.

1. The bulk queues are filled to capacity, so every routine and background event folds.
2. ``events`` notify() calls, each with a new entity id, from ``users`` users: Redis's used_memory is sampled
   against the store's bound, and the outcomes are counted by the grain of the key that took them.
3. The store is drained the way workers would (flush, take the queue's messages, count what they carry): the
   events inside the digests must equal the events folded.
4. Redis gets a maxmemory just above what it holds, and POSTs to the ingest endpoint go on until it is full: the
   answers are counted, and none may be a 500.
"""

import json
import time
from collections import Counter

from django.contrib.auth import get_user_model
from django.test import Client, override_settings

from digest.flush import run_flush
from notifications import Rejected, Unavailable, notify
from notifications.models import IngestToken
from pipeline import keys
from pipeline.conf import sluice_settings
from pipeline.metrics import read_counters
from pipeline.store import get_redis

KINDS = ("task.comment", "task.due_changed", "task.assigned", "board.updated")
PAYLOAD = {"title": "Quarterly report move", "note": "x" * 200}


def run(redis_url, events, users, stdout):
    """Run the four steps; return the figures."""
    client = get_redis()
    client.flushdb()
    queues = {"critical": {"capacity": 2048}, "routine": {"capacity": 2048}, "background": {"capacity": 2048}}
    User = get_user_model()
    people = [User.objects.get_or_create(username=f"folds-{n}")[0] for n in range(users)]
    with override_settings(SLUICE_QUEUES=queues):
        bound = sluice_settings().digest
        for klass in ("routine", "background"):
            client.lpush(klass, *(["occupied"] * queues[klass]["capacity"]))
        baseline = client.info("memory")["used_memory"]
        outcomes, peak = Counter(), baseline
        began = time.time()
        for n in range(events):
            try:
                outcomes[str(notify(people[n % users], KINDS[n % len(KINDS)], entity_id=f"e{n}", payload=PAYLOAD))] += 1
            except Rejected:
                outcomes["rejected"] += 1
            if n % 1000 == 0:
                peak = max(peak, client.info("memory")["used_memory"])
                stdout.write(f"  {n:,} events, Redis {peak / 2**20:.1f} MiB", ending="\r")
        peak = max(peak, client.info("memory")["used_memory"])
        seconds = time.time() - began
        counters = read_counters(client)
        size_keys, size_bytes = (int(v or 0) for v in client.hmget(keys.fold_store_size(), "k", "b"))
        delivered = drain(client)
        full = fill_redis_then_post(client, people[0])
    folded = outcomes["folded"] + outcomes["collapsed"]
    return {
        "events": events,
        "users": users,
        "seconds": round(seconds, 1),
        "outcomes": dict(outcomes),
        "by_grain": {
            grain: int(sum(v for k, v in counters.items() if k.startswith("foldgrain:") and k.endswith(f":{grain}")))
            for grain in ("entity", "kind", "user")
        },
        "refused": outcomes["rejected"],
        "store_keys_at_end": size_keys,
        "store_bytes_at_end": size_bytes,
        "bound_keys": bound["max_fold_keys"],
        "bound_bytes": bound["max_fold_bytes"],
        "redis_used_memory_before_mib": round(baseline / 2**20, 2),
        "redis_used_memory_peak_mib": round(peak / 2**20, 2),
        "redis_growth_mib": round((peak - baseline) / 2**20, 2),
        "events_in_digests": delivered["events"],
        "digests": delivered["digests"],
        "unaccounted": events - (outcomes["accepted"] + outcomes["rejected"] + delivered["events"]),
        "folded": folded,
        "redis_full": full,
    }


def drain(client):
    """Flush until the store is empty, taking the digests off the queues as workers would."""
    delivered = Counter()
    client.delete("routine", "background")
    for _ in range(10_000):
        run_flush("bench")
        moved = False
        for queue in ("routine", "background"):
            while raw := client.rpop(queue):
                moved = True
                kwargs = json.loads(__import__("base64").b64decode(json.loads(raw)["body"]))[1]
                delivered["events"] += kwargs.get("count", 1)
                delivered["digests"] += 1
        if not moved and not client.zcard(keys.pending()):
            break
    return dict(delivered)


def fill_redis_then_post(client, user, limit=20_000):
    """Cap Redis just above what it holds, then POST events until it is full; count the answers."""
    token = IngestToken(name="bench-folds", rate_per_second=1e6, burst=10**6)
    raw = token.set_new_token()
    token.save()
    used = client.info("memory")["used_memory"]
    client.config_set("maxmemory-policy", "noeviction")
    client.config_set("maxmemory", used + 2 * 2**20)
    http, statuses = Client(HTTP_HOST="127.0.0.1"), Counter()  # a host ALLOWED_HOSTS lets in
    try:
        for n in range(limit):
            body = {"user": user.pk, "kind": KINDS[n % len(KINDS)], "entity_id": f"full-{n}", "payload": PAYLOAD}
            response = http.post(
                "/api/notifications/", json.dumps(body), content_type="application/json",
                HTTP_AUTHORIZATION=f"Bearer {raw}",
            )  # fmt: skip
            statuses[response.status_code] += 1
            if statuses[503] >= 50:
                break
        try:
            notify(user, "task.comment", entity_id="after")
            direct = "accepted"
        except Unavailable:
            direct = "Unavailable"
    finally:
        client.config_set("maxmemory", 0)
    return {"statuses": {str(k): v for k, v in sorted(statuses.items())}, "notify_when_full": direct}
