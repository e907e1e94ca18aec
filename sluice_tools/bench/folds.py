"""bench folds: 100,000 distinct entity ids against full queues. The fold store stays under its bound (coarser
folds, then refusals), every call is accounted for, and once Redis itself is full ingest answers 503, not 500.

1. The bulk queues are filled to capacity, so every routine and background event folds.
2. ``events`` notify() calls, each with a new entity id, from ``users`` users: Redis's used_memory and the store's
   own byte count are sampled against the store's bound, and the outcomes are counted by the grain of the key that
   took them. Ids and payloads are of ordinary sizes: ids of 8 to 194 characters, payloads mostly under 1 KiB,
   some up to 4 KiB and a few up to 15 KiB (see ``entity_id`` and ``payload``).
3. The store is drained the way workers would (flush, take the queue's messages, count what they carry): the
   events inside the digests must equal the events folded.
4. Redis gets a maxmemory just above what it holds, and POSTs to the ingest endpoint go on until it is full: the
   answers are counted, and none may be a 500.
"""

import json
import random
import time
from collections import Counter

from django.conf import settings
from django.contrib.auth import get_user_model
from django.test import Client, override_settings

from digest.flush import run_flush
from notifications import Rejected, Unavailable, notify
from notifications.models import IngestToken
from pipeline.conf import CLASSES, sluice_settings
from pipeline.connections import get_redis
from pipeline.metrics import fold_grain_field, read_counters
from pipeline.redis import keys

KINDS = ("task.comment", "task.due_changed", "task.assigned", "board.updated")
PAYLOAD = {"title": "Quarterly report move", "note": "x" * 200}
TEXT = "Moved the quarterly report to Friday; see the attached notes. " * 300  # cut to each payload's size


def entity_id(n, chance):
    """A distinct id of 8 to 194 characters, as ids are: short numeric ones, UUID-sized ones, and long paths."""
    length = chance.choice((chance.randint(8, 16), 36, chance.randint(40, 194)))
    head = f"{n:07d}-"
    return (head + "p" * length)[: max(length, len(head))]


def payload(chance):
    """A payload of an ordinary size: 80% 200 B to 1 KiB, 15% up to 4 KiB, 5% up to 15 KiB."""
    roll = chance.random()
    size = (
        chance.randint(200, 1024)
        if roll < 0.8
        else chance.randint(1024, 4096)
        if roll < 0.95
        else chance.randint(4096, 15 * 1024)
    )
    return {"title": "Quarterly report move", "note": TEXT[:size]}


def run(redis_url, events, users, stdout, max_fold_bytes=None):
    """Run the four steps (under a fold store of ``max_fold_bytes``, or the configured bound); return the figures."""
    client = get_redis()
    client.flushdb()
    queues = {"critical": {"capacity": 2048}, "routine": {"capacity": 2048}, "background": {"capacity": 2048}}
    User = get_user_model()
    people = [User.objects.get_or_create(username=f"folds-{n}")[0] for n in range(users)]
    digest = dict(settings.SLUICE_DIGEST) | ({"max_fold_bytes": max_fold_bytes} if max_fold_bytes else {})
    with override_settings(SLUICE_QUEUES=queues, SLUICE_DIGEST=digest):
        bound = sluice_settings().digest
        for klass in ("routine", "background"):
            client.lpush(klass, *(["occupied"] * queues[klass]["capacity"]))
        baseline = client.info("memory")["used_memory"]
        outcomes, peak, store_peak = Counter(), baseline, 0
        chance = random.Random(24)
        began = time.time()
        for n in range(events):
            person, kind = people[n % users], KINDS[n % len(KINDS)]
            try:
                outcomes[str(notify(person, kind, entity_id=entity_id(n, chance), payload=payload(chance)))] += 1
            except Rejected:
                outcomes["rejected"] += 1
            if n % 500 == 0:
                peak = max(peak, client.info("memory")["used_memory"])
                store_peak = max(store_peak, int(client.hget(keys.fold_store_size(), "b") or 0))
                stdout.write(f"  {n:,} events, Redis {peak / 2**20:.1f} MiB", ending="\r")
        peak = max(peak, client.info("memory")["used_memory"])
        store_peak = max(store_peak, int(client.hget(keys.fold_store_size(), "b") or 0))
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
            grain: sum(counters.get(fold_grain_field(klass, grain), 0) for klass in CLASSES)
            for grain in ("entity", "kind", "user")
        },
        "refused": outcomes["rejected"],
        "store_keys_at_end": size_keys,
        "store_bytes_at_end": size_bytes,
        "store_bytes_peak": store_peak,
        "store_bytes_peak_over_bound": round(store_peak / bound["max_fold_bytes"], 3),
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
    token = IngestToken(name="bench-folds", rate_per_second=1e6, burst=10**6, kinds=list(KINDS))
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
