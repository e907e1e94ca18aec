"""bench admission --fanout N: notify_many() for N users against a loop of N notify() calls, interleaved in one run.

Both paths send the same event to the same users, with room in the queue for every call (the accepted path, as
bench admission measures). Each is timed by wall clock and by this process's CPU, and its round trips counted, for
the users given as User objects and as primary keys (the loop then asks the database once a call, as notify() does).
"""

import statistics
import time
import uuid

from django.contrib.auth import get_user_model
from django.test import override_settings

from notifications import Outcome, notify, notify_many
from pipeline.connections import get_redis
from sluice_tools.bench.admission_bench import KIND, PAYLOAD, RoundTrips, with_every_choice

PATHS = ("loop", "many")
INPUTS = ("objects", "pks")


def run(fanout=180, rounds=5, progress=None, choices=False, idempotency=False):
    """Measure both paths ``rounds`` times for each input, alternating; return the medians and their ratios."""
    queues = {k: {"capacity": fanout * rounds * 8 + 1000} for k in ("critical", "routine", "background")}
    kinds = {KIND: {"class": "routine", "channels": ["email", "push"], "throttle": {"max": 10**6, "per_s": 3600}}}
    User = get_user_model()
    run_id = uuid.uuid4().hex[:8]
    users = [User.objects.create(username=f"bench-fanout-{run_id}-{n}") for n in range(fanout)]
    try:
        with override_settings(SLUICE_QUEUES=queues, **({"SLUICE_KINDS": kinds} if choices else {})):
            if choices:
                with_every_choice(users)
            return measure(users, rounds, progress, choices, idempotency, run_id)
    finally:
        User.objects.filter(pk__in=[user.pk for user in users]).delete()


def measure(users, rounds, progress, choices, idempotency, run_id):
    client = get_redis()
    wall = {(path, given): [] for path in PATHS for given in INPUTS}
    cpu = {key: [] for key in wall}
    trips = dict.fromkeys(wall, 0)
    notify_many(users[:1], KIND, entity_id="warm-up", payload=PAYLOAD)
    notify(users[0], KIND, entity_id="warm-up", payload=PAYLOAD)
    for round_no in range(rounds):
        for given in INPUTS:
            named = users if given == "objects" else [user.pk for user in users]
            for path in PATHS:
                key = f"bench-{run_id}-{round_no}-{given}-{path}" if idempotency else None
                entity = f"fanout-{round_no}-{given}-{path}"
                with RoundTrips() as counted:
                    started, started_cpu = time.perf_counter(), time.process_time()
                    if path == "loop":
                        outcomes = [
                            notify(user, KIND, entity_id=entity, payload=PAYLOAD, idempotency_key=key and f"{key}-{i}")
                            for i, user in enumerate(named)
                        ]
                        accepted = outcomes.count(Outcome.ACCEPTED)
                    else:
                        result = notify_many(named, KIND, entity_id=entity, payload=PAYLOAD, idempotency_key=key)
                        accepted = result.counts.get(Outcome.ACCEPTED, 0)
                    wall[path, given].append(time.perf_counter() - started)
                    cpu[path, given].append(time.process_time() - started_cpu)
                trips[path, given] += counted.count
                if accepted != len(users):
                    raise RuntimeError(f"{path} accepted {accepted} of {len(users)}: the paths are not comparable")
        client.delete("routine")
        if progress:
            progress(round_no + 1, rounds, {f"{p}/{g}": round(v[-1] * 1000, 2) for (p, g), v in wall.items()})
    result = {"users": len(users), "rounds": rounds, "every_user_has_choices": choices, "idempotency_keys": idempotency}
    for given in INPUTS:
        loop_ms, many_ms = (statistics.median(wall[p, given]) * 1000 for p in PATHS)
        loop_cpu, many_cpu = (statistics.median(cpu[p, given]) * 1000 for p in PATHS)
        result[f"users_as_{given}"] = {
            "loop_ms": round(loop_ms, 2),
            "notify_many_ms": round(many_ms, 2),
            "wall_ratio": round(loop_ms / many_ms, 1),
            "loop_cpu_ms": round(loop_cpu, 2),
            "notify_many_cpu_ms": round(many_cpu, 2),
            "cpu_ratio": round(loop_cpu / many_cpu, 1),
            "round_trips_loop": round(trips["loop", given] / rounds, 1),
            "round_trips_notify_many": round(trips["many", given] / rounds, 1),
        }
    return result
