"""`bench providers`: provider A goes down for 20 s in the middle of a burst of critical SMS (sign-in codes).

Two runs, side by side: with failover (providers A then B, each behind its breaker) and without (A alone). Each
measures, per message, the time from notify() to the provider's acceptance (the stand-in's own clock, on the same
machine), and counts what was lost (neither accepted nor dead-lettered) and duplicated (accepted twice, by one
provider or by both). The providers are HTTP stand-ins on loopback (sluice_tools.bench.standin) and the workers
are real `manage.py worker critical` processes.
"""

import json
import time

from django.contrib.auth import get_user_model
from django.test import override_settings

from notifications import notify
from pipeline.broker import deadletters
from pipeline.connections import get_redis
from pipeline.metrics import read_counters
from sluice_tools.processes import WorkerProcess

from .common import percentile
from .standin import ProviderStandIn

KIND = "login.code"
KINDS = {KIND: {"class": "critical", "channels": ["sms"], "expires_after_s": 300}}
QUEUES = {k: {"capacity": 10_000} for k in ("critical", "routine", "background")}
HTTP = "notifications.channels.http_provider.HttpProviderChannel"
OPTIONS = {
    "recipient": "payload.phone",
    "timeout_s": 2,
    "message_id_field": "sid",
    "body": {"to": "{recipient}", "body": "{body}", "ref": "{entity_id}"},
}


def channels(standins):
    """The SMS channel over ``standins``, in order, with the breaker's shipped defaults."""
    providers = [{"name": s.name, "backend": HTTP, "options": {**OPTIONS, "url": s.url}} for s in standins]
    return {"sms": {"providers": providers}}


def run(redis_url, seconds, rate, outage_at, outage_s, concurrency, drain_s, stdout):
    """Both runs; the figures side by side."""
    runs = {}
    for label, failover in (("failover", True), ("single", False)):
        stdout.write(f"{label}: {rate}/s for {seconds:g} s, provider A down from {outage_at:g} s for {outage_s:g} s")
        runs[label] = run_once(redis_url, failover, seconds, rate, outage_at, outage_s, concurrency, drain_s, stdout)
        stdout.write(json.dumps({k: v for k, v in runs[label].items() if not isinstance(v, dict)}))
    with_, without = runs["failover"], runs["single"]
    return {
        "critical_p99_ms_failover": with_["p99_ms"],
        "critical_p99_ms_single_provider": without["p99_ms"],
        "critical_p99_ms_during_outage_failover": with_["outage_p99_ms"],
        "critical_p99_ms_during_outage_single_provider": without["outage_p99_ms"],
        "lost": with_["lost"] + without["lost"],
        "duplicates": with_["duplicates"] + without["duplicates"],
        "config": {
            "seconds": seconds,
            "rate_per_s": rate,
            "outage_at_s": outage_at,
            "outage_s": outage_s,
            "worker_concurrency": concurrency,
            "provider_latency_ms": 20,
            "outage": "provider A answers 503 to every call",
        },
        "runs": runs,
    }


def run_once(redis_url, failover, seconds, rate, outage_at, outage_s, concurrency, drain_s, stdout):
    """One run: the burst, A's outage in its middle, then waiting until every message is accepted or dead-lettered."""
    client = get_redis()
    client.flushdb()
    a, b = ProviderStandIn("a", latency_s=0.02).start(), ProviderStandIn("b", latency_s=0.02).start()
    conf = {"SLUICE_CHANNELS": channels([a, b] if failover else [a]), "SLUICE_KINDS": KINDS, "SLUICE_QUEUES": QUEUES}
    env = {name: json.dumps(value) for name, value in conf.items()}
    worker = WorkerProcess("critical", redis_url, env=env, extra=["--concurrency", str(concurrency)])
    user = get_user_model()(pk=1)
    enqueued = {}
    try:
        worker.start()
        with override_settings(**conf):
            started = time.monotonic()
            for n in range(int(seconds * rate)):
                due = started + n / rate
                time.sleep(max(0.0, due - time.monotonic()))
                elapsed = time.monotonic() - started
                a.set_mode("fail" if outage_at <= elapsed < outage_at + outage_s else "healthy")
                entity = f"c{n}"
                enqueued[entity] = (time.time(), elapsed)
                notify(user, KIND, entity_id=entity, payload={"phone": "+15550100"})
            a.set_mode("healthy")
            deadline = time.monotonic() + drain_s
            while time.monotonic() < deadline and _settled(enqueued, a, b) < len(enqueued):
                time.sleep(0.5)
            time.sleep(1.0)  # a straggling resend would show up as a duplicate
            letters = {letter.kwargs.get("entity_id") for letter in deadletters.entries()}
            counters = read_counters()
    finally:
        worker.stop()
        a.stop()
        b.stop()
    return summarize(enqueued, a, b, letters, counters, outage_at, outage_s)


def _settled(enqueued, a, b):
    refs = {ref for standin in (a, b) for _id, _at, ref in list(standin.accepted)}
    letters = {letter.kwargs.get("entity_id") for letter in deadletters.entries()}
    return len((refs | letters) & set(enqueued))


def summarize(enqueued, a, b, letters, counters, outage_at, outage_s):
    """Latency from notify() to the first acceptance, per message; lost, duplicated and dead-lettered counts."""
    accepted = {}
    for standin in (a, b):
        for _message_id, at, ref in standin.accepted:
            accepted.setdefault(ref, []).append((at, standin.name))
    latencies, outage = [], []
    for entity, (t0, elapsed) in enqueued.items():
        if entity in accepted:
            ms = (min(at for at, _name in accepted[entity]) - t0) * 1000
            latencies.append(ms)
            if outage_at <= elapsed < outage_at + outage_s:
                outage.append(ms)
    transitions = {
        field.rsplit(":", 1)[-1]: int(value)
        for field, value in counters.items()
        if field.startswith("provider_transitions:sms:a:")
    }
    return {
        "messages": len(enqueued),
        "accepted": len(accepted),
        "accepted_by_b": sum(1 for hits in accepted.values() if any(name == "b" for _at, name in hits)),
        "dead_lettered": len(letters & set(enqueued)),
        "lost": len(set(enqueued) - set(accepted) - letters),
        # One event is one notification id: accepted twice, by one provider or by both, is a duplicate.
        "duplicates": sum(1 for hits in accepted.values() if len(hits) > 1),
        "p50_ms": _round(percentile(latencies, 50)),
        "p99_ms": _round(percentile(latencies, 99)),
        "max_ms": _round(max(latencies, default=None)),
        "outage_messages": len(outage),
        "outage_p50_ms": _round(percentile(outage, 50)),
        "outage_p99_ms": _round(percentile(outage, 99)),
        "calls_to_a": a.calls,
        "calls_to_b": b.calls,
        "breaker_a_transitions": transitions,
        "provider_calls": {
            field.removeprefix("provider_calls:sms:"): int(value)
            for field, value in counters.items()
            if field.startswith("provider_calls:sms:")
        },
    }


def _round(value):
    return None if value is None else round(value, 1)
