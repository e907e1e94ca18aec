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


def run(calls=3000, rounds=3, progress=None):
    """Measure each path ``rounds`` times, alternating, and return the medians and notify()'s latencies."""
    # Room for every call: this measures the accepted path, the one a web request takes normally.
    queues = {k: {"capacity": calls * 4} for k in ("critical", "routine", "background")}
    user = get_user_model()(pk=1)
    client = get_redis()
    kwargs = {"notification_id": "x" * 32, "kind": KIND, "user_id": 1, "entity_id": "task_42", "payload": PAYLOAD}
    rates = {"notify": [], "apply_async": [], "lpush": []}
    latencies = []
    with override_settings(SLUICE_QUEUES=queues):
        notify(user, KIND, entity_id="warm-up", payload=PAYLOAD)
        send_tasks["routine"].apply_async(kwargs=kwargs)
        sample = client.lindex("routine", 0)
        for round_no in range(rounds):
            client.delete("routine")
            started = time.perf_counter()
            for i in range(calls):
                t = time.perf_counter()
                notify(user, KIND, entity_id=f"task_{i}", payload=PAYLOAD)
                latencies.append(time.perf_counter() - t)
            rates["notify"].append(calls / (time.perf_counter() - started))
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
    }
