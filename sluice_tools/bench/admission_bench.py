"""bench admission: notify() against a plain apply_async and a raw LPUSH, interleaved in one run."""

import statistics
import time
import uuid
from contextlib import nullcontext

from django.contrib.auth import get_user_model
from django.test import override_settings

from notifications import Outcome, notify
from notifications.delivery.tasks import send_tasks
from pipeline.connections import get_redis
from sluice_tools.bench.common import percentile

PAYLOAD = {"title": "Quarterly report move", "due": "2026-12-01", "by": "Ada"}
KIND = "task.comment"


USERS = 100
# Calls of one path before the next path takes its turn.
CHUNK = 100


def with_every_choice(users):
    """Give each user preferences, quiet hours (not now) and the kind a throttle that does not trip: admission
    then reads and decides all of them, and the event is still accepted, the path measured here."""
    from datetime import UTC, datetime, timedelta

    from notifications import preferences

    now = datetime.now(UTC)
    for user in users:
        preferences.set(user, kind=KIND, channel="push", mode="off")
        preferences.set(user, category="", mode="instant")
        preferences.set_quiet_hours(user, "UTC", (now + timedelta(hours=2)).time(), (now + timedelta(hours=3)).time())
    preferences.write_mirror([u.pk for u in users])


class RoundTrips:
    """Counts the commands this process sends to Redis (a pipeline is one): round trips, client side."""

    def __init__(self):
        from redis.connection import AbstractConnection

        self.count, self.cls = 0, AbstractConnection
        self.original = AbstractConnection.send_packed_command

    def __enter__(self):
        counter = self

        def send(connection, command, check_health=True):
            counter.count += 1
            return counter.original(connection, command, check_health)

        self.cls.send_packed_command = send
        return self

    def __exit__(self, *exc):
        self.cls.send_packed_command = self.original


def commandstats(client):
    return {name: stats["calls"] for name, stats in client.info("commandstats").items()}


def count_commands(client, users, calls, key_of=lambda i: None):
    """What ran in Redis for one notify() (INFO commandstats before and after ``calls`` calls, the scripts' own
    commands included, less the INFO itself)."""
    client.delete("routine")
    before = commandstats(client)
    for i in range(calls):
        notify(users[i % len(users)], KIND, entity_id=f"count_{i}", payload=PAYLOAD, idempotency_key=key_of(i))
    after = commandstats(client)
    client.delete("routine")
    return {
        name.removeprefix("cmdstat_"): round((value - before.get(name, 0)) / calls, 3)
        for name, value in sorted(after.items())
        if value - before.get(name, 0) and name != "cmdstat_info"
    }


def run(calls=3000, rounds=3, progress=None, choices=False, idempotency=False):
    """Measure each path ``rounds`` times, alternating, and return the medians and notify()'s latencies. With
    ``choices``, every user has preferences, quiet hours and a throttled kind, all decided by admission. With
    ``idempotency``, every notify() carries a new idempotency key (recorded by admission), and the result says
    what one recorded key costs in Redis and what a replay costs."""
    # Room for every call: this measures the accepted path, the one a web request takes normally.
    queues = {k: {"capacity": calls * 4} for k in ("critical", "routine", "background")}
    kinds = {KIND: {"class": "routine", "channels": ["email", "push"], "throttle": {"max": 10**6, "per_s": 3600}}}
    User = get_user_model()
    users = [User(pk=1)]
    if choices:
        users = [User.objects.get_or_create(username=f"bench-{n}")[0] for n in range(USERS)]
    try:
        return measure(users, calls, rounds, progress, choices, queues, kinds, idempotency)
    finally:
        if choices:
            # Left in the project's database, they and their choices would be mirrored by the next flush that
            # runs against it (the demo's, another bench's).
            User.objects.filter(pk__in=[user.pk for user in users]).delete()


def measure(users, calls, rounds, progress, choices, queues, kinds, idempotency=False):
    """The interleaved rounds of run()."""
    client = get_redis()
    run_id = uuid.uuid4().hex[:8]
    kwargs = {"notification_id": "x" * 32, "kind": KIND, "user_id": 1, "entity_id": "task_42", "payload": PAYLOAD}
    # With idempotency, a fourth path beside the others: notify() with a new key each call (the path a first call
    # takes: the key checked, then recorded), so its cost is a ratio to the keyless notify() of the same run.
    paths = ("notify", "apply_async", "lpush", *(("notify_keyed",) if idempotency else ()))
    rates = {name: [] for name in paths}
    cpu_us = {name: [] for name in paths}
    latencies = {"notify": [], "notify_keyed": []}
    trips = {"notify": 0, "notify_keyed": 0}
    with override_settings(SLUICE_QUEUES=queues, **({"SLUICE_KINDS": kinds} if choices else {})):
        if choices:
            with_every_choice(users)
        notify(users[0], KIND, entity_id="warm-up", payload=PAYLOAD)
        send_tasks["routine"].apply_async(kwargs=kwargs)
        sample = client.lindex("routine", 0)
        counted_calls = min(calls, 1000)
        commands = count_commands(client, users, counted_calls)
        if idempotency:
            keyed_commands = count_commands(client, users, counted_calls, lambda i: f"bench-{run_id}-count-{i}")
        round_no = 0

        def one_notify(i, path="notify"):
            key = f"bench-{run_id}-{round_no}-{i}" if path == "notify_keyed" else None
            t = time.perf_counter()
            notify(users[i % len(users)], KIND, entity_id=f"task_{i}", payload=PAYLOAD, idempotency_key=key)
            latencies[path].append(time.perf_counter() - t)

        calls_of = {
            "notify": one_notify,
            "notify_keyed": lambda i: one_notify(i, "notify_keyed"),
            "apply_async": lambda i: send_tasks["routine"].apply_async(kwargs=kwargs),
            "lpush": lambda i: client.lpush("routine", sample),
        }
        for round_no in range(rounds):
            client.delete("routine")
            wall, cpu = dict.fromkeys(paths, 0.0), dict.fromkeys(paths, 0.0)
            # Interleaved in chunks, so that a neighbour's load on this shared machine falls on every path alike.
            for first in range(0, calls, CHUNK):
                for name in paths:
                    with RoundTrips() if name in trips else nullcontext() as counted:
                        started, started_cpu = time.perf_counter(), time.process_time()
                        for i in range(first, min(first + CHUNK, calls)):
                            calls_of[name](i)
                        wall[name] += time.perf_counter() - started
                        cpu[name] += time.process_time() - started_cpu
                    if counted is not None:
                        trips[name] += counted.count
            client.delete("routine")
            for name in paths:
                rates[name].append(calls / wall[name])
                cpu_us[name].append(cpu[name] / calls * 1e6)
            if progress:
                progress(round_no + 1, rounds, {k: v[-1] for k, v in rates.items()})
    medians = {k: statistics.median(v) for k, v in rates.items()}
    cpu = {k: statistics.median(v) for k, v in cpu_us.items()}
    result = {
        "notify_per_s": round(medians["notify"]),
        "apply_async_per_s": round(medians["apply_async"]),
        "lpush_per_s": round(medians["lpush"]),
        "notify_p50_ms": round(percentile(latencies["notify"], 50) * 1000, 3),
        "notify_p99_ms": round(percentile(latencies["notify"], 99) * 1000, 3),
        "notify_vs_apply_async": round(medians["notify"] / medians["apply_async"], 2),
        "lpush_vs_notify_per_call": round(medians["lpush"] / medians["notify"], 2),
        "message_bytes": len(sample),
        "calls_per_round": calls,
        "rounds": rounds,
        "every_user_has_choices": choices,
        # The producer's own CPU a call (median of the rounds), and the ratio of apply_async's to notify()'s: what
        # the calls cost this process, whatever else the machine runs.
        "producer_cpu_us_per_call": {name: round(v, 1) for name, v in cpu.items()},
        "notify_vs_apply_async_cpu": round(cpu["apply_async"] / cpu["notify"], 2),
        # Client side: what notify() sent to Redis, in every timed call. Server side: see count_commands().
        "round_trips_per_notify": round(trips["notify"] / (calls * rounds), 3),
        "redis_commands_per_notify": commands,
        "idempotency_keys": idempotency,
    }
    if idempotency:
        result.update(
            {
                "keyed_notify_per_s": round(medians["notify_keyed"]),
                "keyed_vs_keyless_notify": round(medians["notify_keyed"] / medians["notify"], 2),
                "keyed_notify_p50_ms": round(percentile(latencies["notify_keyed"], 50) * 1000, 3),
                "keyed_notify_p99_ms": round(percentile(latencies["notify_keyed"], 99) * 1000, 3),
                "round_trips_per_keyed_notify": round(trips["notify_keyed"] / (calls * rounds), 3),
                "redis_commands_per_keyed_notify": keyed_commands,
                **key_costs(client, users[0], queues),
            }
        )
    return result


#: How many keys the bytes a key really takes are measured over: Redis's tables of keys and of expiries grow by
#: doubling, so what one more key costs depends on how full they are.
KEYS_MEASURED = (20_000, 100_000)


def key_costs(client, user, queues):
    """What one recorded idempotency key holds in Redis (MEMORY USAGE, with its TTL), for a caller's key of 5 and
    of 255 characters; what a key really takes (used_memory per key over KEYS_MEASURED keyed notify() calls of a user
    who turned the kind off: each is SUPPRESSED, publishes nothing and records its key, so the key is all that
    grows); and the round trips of a replay. The bench's keys are dropped after."""
    from notifications.api import NOTIFY_SCOPE
    from pipeline.redis import keys

    sizes = {}
    with override_settings(SLUICE_QUEUES=queues):
        for length in (5, 255):
            caller_key = uuid.uuid4().hex.ljust(length, "k")[:length]
            notify(user, KIND, entity_id="key-cost", payload=PAYLOAD, idempotency_key=caller_key)
            sizes[f"{length}_chars"] = client.memory_usage(keys.idempotency(NOTIFY_SCOPE, caller_key), samples=0)
        with RoundTrips() as counted:
            notify(user, KIND, entity_id="key-cost", payload=PAYLOAD, idempotency_key=caller_key)
    client.delete("routine")
    _drop_keys(client, keys.idempotency_pattern())
    return {
        "idempotency_key_bytes": sizes,
        "idempotency_key_used_bytes": suppressed_key_bytes(client, queues),
        "round_trips_per_replay": counted.count,
    }


def suppressed_key_bytes(client, queues):
    """{keys: used_memory per key} for KEYS_MEASURED keyed notify() calls that each come to SUPPRESSED."""
    from notifications import preferences
    from pipeline.redis import keys

    user = get_user_model().objects.get_or_create(username="bench-suppressed")[0]
    used = {}
    try:
        preferences.set(user, kind=KIND, mode="off")
        preferences.write_mirror([user.pk])
        # The key alone: each call's activity entry is bounded by the log's own buffer (bench admission --activity).
        with override_settings(SLUICE_QUEUES=queues, SLUICE_ACTIVITY={"enabled": False}):
            if notify(user, KIND, entity_id="e", payload=PAYLOAD) is not Outcome.SUPPRESSED:
                raise RuntimeError(f"{KIND} with every channel off was not suppressed: the bytes are not a key's")
            for count in KEYS_MEASURED:
                before = client.info("memory")["used_memory"]
                for _ in range(count):
                    notify(user, KIND, entity_id="e", payload=PAYLOAD, idempotency_key=uuid.uuid4().hex)
                used[str(count)] = round((client.info("memory")["used_memory"] - before) / count, 1)
                _drop_keys(client, keys.idempotency_pattern())
    finally:
        client.delete(keys.preferences(user.pk))
        user.delete()
    return used


def _drop_keys(client, pattern):
    recorded = list(client.scan_iter(match=pattern, count=1000))
    for first in range(0, len(recorded), 500):
        client.delete(*recorded[first : first + 500])
