"""bench batches: background throughput per worker slot with batches against single sends, and critical p99 while
background batches run, side by side in one run.

The provider is simulated (provider.SimulatedProvider): every call costs ``latency_ms`` (a round trip) and every
message in it ``per_message_ms`` more, so a bulk call of n messages costs one round trip plus n small costs, like a
multicast. Throughput: the background queue is filled, then one worker with one slot drains it; messages sent ÷ the
time from the first send to the last. Critical p99: critical events arrive at a steady rate, enqueue → the provider's
return, first with no background load, then while a background worker drains a flood in batches on the same channel
(through its gate).
"""

import json
import threading
import time
import uuid

from django.contrib.auth import get_user_model
from django.test import override_settings

from notifications import notify
from pipeline.broker.message import envelope
from pipeline.connections import get_redis

from ..processes import WorkerProcess
from .common import percentile
from .provider import SENT_KEY, sent_records

PROVIDER = "sluice_tools.bench.provider.SimulatedProvider"
KINDS = {
    "meeting.reminder": {"class": "critical", "channels": ["push"]},
    "board.updated": {"class": "background", "channels": ["push"]},
}
# The gate every send on push passes: critical first, and a hold window after each critical send.
GATE = {"rate_per_s": 5000, "burst": 1000, "hold_ms": 50}
FILL_CHUNK = 1000
SWEEP = (10, 50, 200, 1000)


def _channels(latency_ms, per_message_ms, gate):
    push = {
        "backend": PROVIDER,
        "options": {"latency_ms": latency_ms, "per_message_ms": per_message_ms, "bulk": True},
    }
    if gate:
        push.update(GATE)
    other = {"backend": PROVIDER, "options": {"latency_ms": latency_ms}}
    return {"push": push, "email": other, "sms": other}


def _queues(batch):
    return {
        "critical": {"capacity": 100_000},
        "background": {"capacity": 200_000, "ceiling": 400_000, "batch": batch},
    }


def _env(channels, batch):
    return {
        "SLUICE_KINDS": json.dumps(KINDS),
        "SLUICE_CHANNELS": json.dumps(channels),
        "SLUICE_QUEUES": json.dumps(_queues(batch)),
    }


def fill(count, prefix):
    """Push ``count`` background sends straight onto the queue (admission is not what is measured)."""
    client = get_redis()
    for start in range(0, count, FILL_CHUNK):
        messages = []
        for i in range(start, min(count, start + FILL_CHUNK)):
            nid = f"{prefix}{i}"
            kwargs = {"notification_id": nid, "kind": "board.updated", "user_id": 1, "entity_id": nid, "payload": {}}
            messages.append(envelope("sluice.send.background", nid, json.dumps(kwargs), "background", "{}"))
        client.lpush("background", *messages)


def throughput(redis_url, batch, count, latency_ms, per_message_ms, stdout):
    """Messages a second one background slot sends with batches of ``batch`` (1: single sends)."""
    client = get_redis()
    client.delete(SENT_KEY, "background")
    prefix = f"t{batch}-{uuid.uuid4().hex[:6]}-"
    fill(count, prefix)
    channels = _channels(latency_ms, per_message_ms, gate=True)
    worker = WorkerProcess(
        "background", redis_url, extra=["--concurrency", "1"], env=_env(channels, batch), loglevel="INFO"
    )
    worker.start()
    try:
        deadline = time.monotonic() + 30 + count * (latency_ms + per_message_ms) / 1000 * 1.5
        while client.llen(SENT_KEY) < count and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        worker.stop()
    records = [r for r in sent_records(client) if r["id"].startswith(prefix)]
    first = min(r["started"] for r in records)
    last = max(r["done"] for r in records)
    rate = len(records) / (last - first)
    calls = len({(r["started"], r["pid"]) for r in records})
    stdout.write(
        f"  batch {batch}: {len(records)} of {count} sent in {last - first:.1f} s = {rate:,.0f}/s ({calls} calls)"
    )
    return {
        "batch": batch,
        "messages": count,
        "sent": len(records),
        "distinct": len({r["id"] for r in records}),
        "seconds": round(last - first, 2),
        "per_slot_per_s": round(rate, 1),
        "provider_calls": calls,
    }


class CriticalProducer(threading.Thread):
    """notify() critical reminders at ``rate`` a second, each carrying when it was enqueued (t0)."""

    def __init__(self, rate, seconds, prefix):
        super().__init__(daemon=True)
        self.rate, self.seconds, self.prefix = rate, seconds, prefix
        self.sent = 0

    def run(self):
        user = get_user_model()(pk=1)
        end = time.monotonic() + self.seconds
        while time.monotonic() < end:
            self.sent += 1
            notify(user, "meeting.reminder", entity_id=f"{self.prefix}{self.sent}", payload={"t0": time.time()})
            time.sleep(1 / self.rate)


def critical_latency(redis_url, batch, flood, seconds, rate, latency_ms, per_message_ms, stdout, slots=2):
    """Critical enqueue → sent percentiles, with a background flood drained in batches of ``batch`` (1: single sends),
    or with no background load (``flood`` 0)."""
    client = get_redis()
    client.delete(SENT_KEY, "background", "critical")
    channels = _channels(latency_ms, per_message_ms, gate=True)
    env = _env(channels, max(batch, 1))
    critical = WorkerProcess("critical", redis_url, extra=["--concurrency", "2"], env=env, loglevel="INFO")
    workers = [critical.start()]
    try:
        if flood:
            fill(flood, f"f{batch}-{uuid.uuid4().hex[:6]}-")
            workers.append(
                WorkerProcess("background", redis_url, extra=["--concurrency", "2"], env=env, loglevel="INFO").start()
            )
            time.sleep(2)  # the background pool is busy with batches before the first critical event
        prefix = f"c{batch}-{uuid.uuid4().hex[:6]}-"
        producer = CriticalProducer(rate, seconds, prefix)
        producer.start()
        producer.join()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            done = [r for r in sent_records(client) if r["class"] == "critical"]
            if len(done) >= producer.sent:
                break
            time.sleep(0.2)
        background = [r for r in sent_records(client) if r["class"] == "background"]
    finally:
        for worker in workers:
            worker.stop()
    latencies = [(r["done"] - r["t0"]) * 1000 for r in sent_records(client) if r["class"] == "critical"]
    result = {
        "background_batch": batch,
        "background_flood": flood,
        "critical_sent": len(latencies),
        "critical_enqueued": producer.sent,
        "critical_p50_ms": round(percentile(latencies, 50), 1),
        "critical_p99_ms": round(percentile(latencies, 99), 1),
        "background_sent_meanwhile": len(background),
        "background_mean_call_size": round(sum(r["call_size"] for r in background) / len(background), 1)
        if background
        else None,
    }
    load = (
        "no background" if not flood else "background single sends" if batch == 1 else f"background batches of {batch}"
    )
    stdout.write(
        f"  critical with {load}: p50 {result['critical_p50_ms']} ms, p99 {result['critical_p99_ms']} ms "
        f"({len(latencies)}/{producer.sent}; {len(background)} background sent meanwhile, "
        f"{result['background_mean_call_size']} a provider call)"
    )
    return result


def run(
    redis_url,
    stdout,
    *,
    batch=1000,
    single_count=400,
    batched_count=20_000,
    latency_ms=20.0,
    per_message_ms=0.2,
    seconds=20.0,
    rate=10.0,
    flood=60_000,
):
    """Run both measurements; return the figures."""
    channels = _channels(latency_ms, per_message_ms, gate=True)
    with override_settings(SLUICE_KINDS=KINDS, SLUICE_CHANNELS=channels, SLUICE_QUEUES=_queues(batch)):
        stdout.write(
            f"background throughput, one worker slot, provider {latency_ms} ms a call + {per_message_ms} ms a message"
        )
        single = throughput(redis_url, 1, single_count, latency_ms, per_message_ms, stdout)
        batched = throughput(redis_url, batch, batched_count, latency_ms, per_message_ms, stdout)
        # Other sizes, for choosing one: each drains 30 batches' worth (10 of the largest).
        sweep = {
            size: throughput(redis_url, size, size * (30 if size <= 200 else 10), latency_ms, per_message_ms, stdout)[
                "per_slot_per_s"
            ]
            for size in SWEEP
            if size != batch
        }
        stdout.write(f"critical enqueue -> sent, {rate}/s for {seconds} s")
        quiet = critical_latency(redis_url, 0, 0, seconds, rate, latency_ms, per_message_ms, stdout)
        singles = critical_latency(redis_url, 1, flood, seconds, rate, latency_ms, per_message_ms, stdout)
        loaded = critical_latency(redis_url, batch, flood, seconds, rate, latency_ms, per_message_ms, stdout)
    return {
        "provider_latency_ms_per_call": latency_ms,
        "provider_latency_ms_per_message": per_message_ms,
        "batch": batch,
        "background_per_slot_per_s_single": single["per_slot_per_s"],
        "background_per_slot_per_s_batched": batched["per_slot_per_s"],
        "background_batched_over_single": round(batched["per_slot_per_s"] / single["per_slot_per_s"], 1),
        "background_per_slot_per_s_by_batch": {
            1: single["per_slot_per_s"],
            **sweep,
            batch: batched["per_slot_per_s"],
        },
        "critical_p99_ms_no_background": quiet["critical_p99_ms"],
        "critical_p99_ms_background_batches": loaded["critical_p99_ms"],
        "critical_p99_ms_background_single_sends": singles["critical_p99_ms"],
        "critical_p50_ms_no_background": quiet["critical_p50_ms"],
        "critical_p50_ms_background_batches": loaded["critical_p50_ms"],
        "runs": {
            "single": single,
            "batched": batched,
            "critical_quiet": quiet,
            "critical_background_single": singles,
            "critical_loaded": loaded,
        },
    }
