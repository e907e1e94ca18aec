"""bench cost, ceiling: drive one Redis with many notify() processes and see where Redis's own CPU would cap it."""

import multiprocessing
import os
import time

from django.contrib.auth import get_user_model

from notifications import notify
from pipeline.connections import get_redis

from .meter import Snapshot


def _produce(kind, seconds, worker_no, counts):
    """One producer process: notify() as fast as it can for ``seconds``; report how many."""
    user = get_user_model()(pk=1)
    payload = {"title": "Quarterly report move", "due": "2026-12-01", "by": "Ada"}
    done, deadline = 0, time.monotonic() + seconds
    while time.monotonic() < deadline:
        notify(user, kind, entity_id=f"c{worker_no}-{done}", payload=payload)
        done += 1
    counts.put(done)


def drive(kind, producers, seconds):
    """``producers`` processes for ``seconds``: notifications/s, Redis CPU (cores) and Redis commands/s."""
    client = get_redis()
    context = multiprocessing.get_context("fork")
    counts = context.Queue()
    children = [context.Process(target=_produce, args=(kind, seconds, n, counts)) for n in range(producers)]
    before = Snapshot(client, {})
    for child in children:
        child.start()
    total = sum(counts.get(timeout=seconds + 60) for _ in children)
    for child in children:
        child.join(30)
    delta = before.until(Snapshot(client, {}))
    commands = sum(delta["commands"].values())
    busy = delta["redis_cpu_s"] / delta["seconds"]
    return {
        "producers": producers,
        "notifications_per_s": round(total / delta["seconds"]),
        "redis_cpu_cores": round(busy, 3),
        "redis_commands_per_s": round(commands / delta["seconds"]),
        "redis_cpu_us_per_notification": round(delta["redis_cpu_s"] / total * 1e6, 1),
        # Were Redis's one core the limit: the rate at which it would be busy all the time.
        "notifications_per_s_at_one_redis_core": round(total / delta["redis_cpu_s"]) if delta["redis_cpu_s"] else None,
    }


def run(kind, producer_counts, seconds, stdout):
    """Drive Redis with more and more producers; every step's figures."""
    steps = []
    for producers in producer_counts:
        get_redis().delete(*[name for name in get_redis().keys("routine*")] or ["routine"])
        step = drive(kind, producers, seconds)
        stdout.write(
            f"  {producers} producers: {step['notifications_per_s']:,}/s, Redis {step['redis_cpu_cores']} of a core"
        )
        steps.append(step)
    get_redis().delete(*[name for name in get_redis().keys("routine*")] or ["routine"])
    return {"cpus": os.cpu_count(), "seconds_per_step": seconds, "steps": steps}
