"""The background-flood scenario on a shared, rate-limited SMS channel, with real worker processes.

5,000 background SMS wait; routine SMS trickle in; a critical SMS comes every half second. Used by
`bench gate` (with the gate and without it, side by side) and by the gate's end-to-end test.
"""

import json
import time

from django.contrib.auth import get_user_model
from django.test import override_settings

from notifications import notify
from pipeline.connections import get_redis
from sluice_tools.processes import WorkerProcess

from .common import percentile
from .provider import SENT_KEY, sent_records

PROVIDER = "sluice_tools.bench.provider.SimulatedProvider"
KINDS = {
    "otp.code": {"class": "critical", "channels": ["sms"]},
    "task.sms": {"class": "routine", "channels": ["sms"]},
    "promo.sms": {"class": "background", "channels": ["sms"]},
    "promo.mail": {"class": "background", "channels": ["email"]},
}
QUEUES = {k: {"capacity": 10_000} for k in ("critical", "routine", "background")}


def channels(rate, min_share):
    """SMS: the gate's limit and the provider's own are the same 20/s; email has no limit."""
    sms = {"rate_per_s": rate, "burst": 1, "hold_ms": 200, "routine_min_share": min_share}
    return {
        "sms": {"backend": PROVIDER, "options": {"latency_ms": 5, "rate_per_s": rate}, **sms},
        "email": {"backend": PROVIDER, "options": {"latency_ms": 5}},
        "push": {"backend": PROVIDER, "options": {"latency_ms": 5}},
    }


def run(redis_url, gate_enabled=True, seconds=10.0, flood=5000, rate=20, min_share=0.1, progress=None):
    """Run the scenario once; return the recorded sends (each with ``t0``, its publish time)."""
    client = get_redis()
    client.flushdb()
    conf = {"SLUICE_CHANNELS": channels(rate, min_share), "SLUICE_KINDS": KINDS, "SLUICE_QUEUES": QUEUES}
    env = {name: json.dumps(value) for name, value in conf.items()}
    env["SLUICE_GATE_ENABLED"] = "1" if gate_enabled else "0"
    pools = [("background", 8), ("routine", 4), ("critical", 2)]
    workers = [WorkerProcess(k, redis_url, extra=["--concurrency", str(c)], env=env, loglevel="INFO") for k, c in pools]
    user = get_user_model()(pk=1)
    try:
        with override_settings(SLUICE_GATE_ENABLED=gate_enabled, **conf):
            for i in range(flood):
                notify(user, "promo.sms", entity_id=f"p{i}", payload={"t0": time.time()})
                if i % 10 == 0:  # email rides in the same background queue, between the SMS
                    notify(user, "promo.mail", entity_id=f"m{i}", payload={"t0": time.time()})
            for worker in workers:
                worker.start()
            started = time.monotonic()
            tick = 0
            while (elapsed := time.monotonic() - started) < seconds:
                notify(user, "task.sms", entity_id=f"t{tick}", payload={"t0": time.time()})
                if tick % 5 == 0:
                    notify(user, "otp.code", entity_id=f"o{tick}", payload={"t0": time.time()})
                tick += 1
                if progress and tick % 10 == 0:
                    progress(elapsed, client.llen(SENT_KEY))
                time.sleep(0.1)
            time.sleep(1.0)  # the last critical sends land
    finally:
        for worker in workers:
            worker.stop()
    return sent_records(client)


def summarize(records):
    """Critical send-start latency, the highest SMS rate in any one-second window, and who sent what."""
    sms = [r for r in records if r["channel"] == "sms"]
    critical_ms = [(r["started"] - r["t0"]) * 1000 for r in sms if r["class"] == "critical"]
    by_class = {k: sum(1 for r in sms if r["class"] == k) for k in ("critical", "routine", "background")}
    email = [r["started"] for r in records if r["channel"] == "email"]
    return {
        "critical_sent": len(critical_ms),
        "critical_p50_ms": round(percentile(critical_ms, 50), 1) if critical_ms else None,
        "critical_p99_ms": round(percentile(critical_ms, 99), 1) if critical_ms else None,
        "max_rate_observed_per_s": max_in_window([r["started"] for r in sms]),
        "sms_sent_by_class": by_class,
        "email_sent": len(email),
        "email_rate_per_s": round(len(email) / (max(email) - min(email)), 1) if len(email) > 1 else None,
    }


def max_in_window(times, window=1.0):
    """The most events in any window of ``window`` seconds."""
    times = sorted(times)
    best = start = 0
    for end, t in enumerate(times):
        while t - times[start] >= window:
            start += 1
        best = max(best, end - start + 1)
    return best
