"""bench admission: notify() against a plain apply_async and a raw LPUSH, interleaved in one run."""

import statistics
import time

from django.contrib.auth import get_user_model
from django.test import override_settings

from notifications import notify
from notifications.tasks import send_tasks
from pipeline.store import get_redis

from .common import percentile

PAYLOAD = {"title": "Quarterly report move", "due": "2026-12-01", "by": "Ada"}
KIND = "task.comment"


USERS = 100


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


def run(calls=3000, rounds=3, progress=None, choices=False):
    """Measure each path ``rounds`` times, alternating, and return the medians and notify()'s latencies. With
    ``choices``, every user has preferences, quiet hours and a throttled kind, all decided by admission."""
    # Room for every call: this measures the accepted path, the one a web request takes normally.
    queues = {k: {"capacity": calls * 4} for k in ("critical", "routine", "background")}
    kinds = {KIND: {"class": "routine", "channels": ["email", "push"], "throttle": {"max": 10**6, "per_s": 3600}}}
    User = get_user_model()
    users = [User(pk=1)]
    if choices:
        users = [User.objects.get_or_create(username=f"bench-{n}")[0] for n in range(USERS)]
    client = get_redis()
    kwargs = {"notification_id": "x" * 32, "kind": KIND, "user_id": 1, "entity_id": "task_42", "payload": PAYLOAD}
    rates = {"notify": [], "apply_async": [], "lpush": []}
    latencies = []
    trips, commands = 0, {}
    with override_settings(SLUICE_QUEUES=queues, **({"SLUICE_KINDS": kinds} if choices else {})):
        if choices:
            with_every_choice(users)
        notify(users[0], KIND, entity_id="warm-up", payload=PAYLOAD)
        send_tasks["routine"].apply_async(kwargs=kwargs)
        sample = client.lindex("routine", 0)
        for round_no in range(rounds):
            client.delete("routine")
            before = commandstats(client)
            with RoundTrips() as counted:
                started = time.perf_counter()
                for i in range(calls):
                    t = time.perf_counter()
                    notify(users[i % len(users)], KIND, entity_id=f"task_{i}", payload=PAYLOAD)
                    latencies.append(time.perf_counter() - t)
                rates["notify"].append(calls / (time.perf_counter() - started))
            trips += counted.count
            after = commandstats(client)
            for name, value in after.items():
                commands[name] = commands.get(name, 0) + value - before.get(name, 0)
            client.delete("routine")
            started = time.perf_counter()
            for _ in range(calls):
                send_tasks["routine"].apply_async(kwargs=kwargs)
            rates["apply_async"].append(calls / (time.perf_counter() - started))
            client.delete("routine")
            started = time.perf_counter()
            for _ in range(calls):
                client.lpush("routine", sample)
            rates["lpush"].append(calls / (time.perf_counter() - started))
            client.delete("routine")
            if progress:
                progress(round_no + 1, rounds, {k: v[-1] for k, v in rates.items()})
    medians = {k: statistics.median(v) for k, v in rates.items()}
    return {
        "notify_per_s": round(medians["notify"]),
        "apply_async_per_s": round(medians["apply_async"]),
        "lpush_per_s": round(medians["lpush"]),
        "notify_p50_ms": round(percentile(latencies, 50) * 1000, 3),
        "notify_p99_ms": round(percentile(latencies, 99) * 1000, 3),
        "notify_vs_apply_async": round(medians["notify"] / medians["apply_async"], 2),
        "lpush_vs_notify_per_call": round(medians["lpush"] / medians["notify"], 2),
        "message_bytes": len(sample),
        "calls_per_round": calls,
        "rounds": rounds,
        "every_user_has_choices": choices,
        # Client side: what notify() sent to Redis. Server side (INFO commandstats): what ran, the scripts' own
        # commands included, less the one INFO call in each round.
        "round_trips_per_notify": round(trips / (calls * rounds), 3),
        "redis_commands_per_notify": {
            name.removeprefix("cmdstat_"): round(n / (calls * rounds), 3)
            for name, n in sorted(commands.items())
            if n and name != "cmdstat_info"
        },
    }
