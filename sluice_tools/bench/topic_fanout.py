"""bench topic: a topic of N subscribers fanned out through real workers, and the critical p99 of login.code sends
made during the fan-out against the idle floor measured in the same run.

The subscribers are real users of the project's database (``bench-topic-<n>``, made once and kept for the next run),
subscribed to a topic of this run. Real worker processes run both pools: critical (2 slots) sends login.code, the
background pool (2 slots) runs the fan-out's steps and sends what they admit, in batches. A producer sends a
login.code every 1/rate s, first with nothing else running (the floor), then from notify_topic() until the job is
done, then (the control) while the same pool drains as many background sends pushed onto its queue at once, without
a fan-out: what the fan-out's steps cost the critical pool beyond the sends they cause. Each send's latency is its
pickup: the provider's start less the time it was enqueued (t0).
"""

import json
import re
import statistics
import threading
import time
import uuid

from django.contrib.auth import get_user_model
from django.test import override_settings

from notifications import notify, notify_topic, subscribe
from notifications.topics.models import DONE, Subscription, TopicFanout
from pipeline.broker.message import envelope
from pipeline.connections import get_redis
from pipeline.redis import keys

from ..processes import WorkerProcess
from .common import percentile
from .provider import SENT_KEY, sent_records

PROVIDER = "sluice_tools.bench.provider.SimulatedProvider"
KINDS = {
    "login.code": {"class": "critical", "channels": ["sms"]},
    "board.updated": {"class": "background", "channels": ["push"]},
}
PREFIX = "bench-topic-"
CREATE_CHUNK = 5000


def _channels():
    sms = {"backend": PROVIDER, "options": {"latency_ms": 5}}
    push = {"backend": PROVIDER, "options": {"latency_ms": 5, "per_message_ms": 0.01, "bulk": True}}
    return {"sms": sms, "push": push, "email": sms}


def _queues(subscribers):
    # Room for every subscriber's event: what is measured is the fan-out and the critical pool beside it, not the bound.
    room = subscribers + 10_000
    return {
        "critical": {"capacity": 10_000, "wait_ms": 250},
        "routine": {"capacity": 2048},
        "background": {"capacity": room, "ceiling": 2 * room, "batch": 200},
    }


def bench_users(n):
    """The pks of ``n`` bench users, made (in bulk) where missing; kept for the next run."""
    User = get_user_model()
    have = set(User.objects.filter(username__startswith=PREFIX).values_list("username", flat=True))
    missing = [f"{PREFIX}{i}" for i in range(n) if f"{PREFIX}{i}" not in have]
    for start in range(0, len(missing), CREATE_CHUNK):
        names = missing[start : start + CREATE_CHUNK]
        User.objects.bulk_create([User(username=name, email=f"{name}@example.com", password="!") for name in names])
    names = [f"{PREFIX}{i}" for i in range(n)]
    return User.objects.filter(username__in=names) if n <= 900 else _first(User, n)


def _first(User, n):
    # SQLite caps the variables of one query: the first n bench users by pk instead of a list of names.
    pks = list(User.objects.filter(username__startswith=PREFIX).order_by("pk").values_list("pk", flat=True)[:n])
    return User.objects.filter(pk__gte=pks[0], pk__lte=pks[-1], username__startswith=PREFIX)


class CriticalProducer(threading.Thread):
    """notify() login.code at ``rate`` a second until ``stop`` is set, each carrying when it was enqueued (t0)."""

    def __init__(self, user_pk, rate, prefix, stop):
        super().__init__(daemon=True)
        self.user_pk, self.rate, self.prefix, self.stop = user_pk, rate, prefix, stop
        self.sent = 0

    def run(self):
        user = get_user_model()(pk=self.user_pk)
        while not self.stop.is_set():
            self.sent += 1
            notify(user, "login.code", entity_id=f"{self.prefix}{self.sent}", payload={"t0": time.time()})
            self.stop.wait(1 / self.rate)


def _latencies(prefix):
    return [
        (r["started"] - r["t0"]) * 1000
        for r in sent_records()
        if r["kind"] == "login.code" and r["entity_id"].startswith(prefix)
    ]


def _wait(condition, timeout, step=0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if found := condition():
            return found
        time.sleep(step)
    return condition()


def _phase(user_pk, rate, prefix, until):
    """Critical sends at ``rate`` until ``until()`` returns; then wait for them all to be sent; their latencies."""
    stop = threading.Event()
    producer = CriticalProducer(user_pk, rate, prefix, stop)
    producer.start()
    try:
        until()
    finally:
        stop.set()
        producer.join()
    _wait(lambda: len(_latencies(prefix)) >= producer.sent, 30)
    return producer.sent, _latencies(prefix)


def _warm_up(user_pk, rate, most_s=60, phase_s=2, keeping_up_ms=100):
    """Send until the critical pool keeps up (a phase's p50 under ``keeping_up_ms``; its first sends import and
    connect), at most ``most_s``; return how long it took. The floor is measured after, never across a cold start."""
    for n in range(most_s // phase_s):
        _sent, latencies = _phase(user_pk, rate, f"warm{n}-", lambda: time.sleep(phase_s))
        if latencies and percentile(latencies, 50) < keeping_up_ms:
            break
    return (n + 1) * phase_s


def run(redis_url, stdout, subscribers=100_000, rate=20.0, idle_s=10.0, drain_s=600.0):
    """Run the floor, then the fan-out; return the figures."""
    client = get_redis()
    client.delete(SENT_KEY)
    run_id = uuid.uuid4().hex[:8]
    topic = f"bench:{run_id}"
    channels, queues = _channels(), _queues(subscribers)
    env = {
        name: json.dumps(value)
        for name, value in {"SLUICE_KINDS": KINDS, "SLUICE_CHANNELS": channels, "SLUICE_QUEUES": queues}.items()
    }
    with override_settings(SLUICE_KINDS=KINDS, SLUICE_CHANNELS=channels, SLUICE_QUEUES=queues):
        started = time.monotonic()
        users = bench_users(subscribers)
        made_s = time.monotonic() - started
        started = time.monotonic()
        added = subscribe(topic, users)
        subscribe_s = time.monotonic() - started
        user_pk = users.order_by("pk").values_list("pk", flat=True).first()
        stdout.write(
            f"{added:,} subscribers of {topic} ({made_s:.1f} s for the users, {subscribe_s:.1f} s to subscribe)"
        )
        workers = [
            WorkerProcess(klass, redis_url, extra=["--concurrency", "2"], env=env, loglevel="INFO").start()
            for klass in ("critical", "background")
        ]
        try:
            warm = _warm_up(user_pk, rate)
            stdout.write(f"critical pool warm after {warm} s of sends")
            idle_sent, idle = _phase(user_pk, rate, "idle-", lambda: time.sleep(idle_s))
            stdout.write(f"idle floor: {len(idle)}/{idle_sent} login.code, p99 {percentile(idle, 99):.1f} ms")
            job = {}

            def fan_out():
                begun = time.monotonic()
                job["job"] = notify_topic(topic, "board.updated", entity_id=f"board-{run_id}", payload={"t0": 0})
                job["call_ms"] = (time.monotonic() - begun) * 1000
                _wait(lambda: _state(job["job"].pk) == DONE, drain_s, 0.1)
                job["fanned_out_s"] = time.monotonic() - begun
                # Measured until its sends are out too, as the control is: the same window of work.
                _wait(lambda: _drained(client), drain_s)
                job["all_sent_s"] = time.monotonic() - begun

            loaded_sent, loaded = _phase(user_pk, rate, "load-", fan_out)
            all_sent_s = job["all_sent_s"]
            sends = _pushed(client)
            stdout.write(f"fan-out: p99 {percentile(loaded, 99):.1f} ms; the same sends without a fan-out next")
            # The control: the same number of background sends, pushed onto the queue at once (no fan-out steps),
            # drained by the same pool while login.code is measured again.
            pks = list(users.order_by("pk").values_list("pk", flat=True))
            fill(client, pks, f"ctl-{run_id}-")
            begun = time.monotonic()
            control_sent, control = _phase(user_pk, rate, "ctl-", lambda: _wait(lambda: _drained(client), drain_s))
            control_s = time.monotonic() - begun
        finally:
            for worker in workers:
                worker.stop()
        steps = _step_seconds(workers[1].output())
        done = TopicFanout.objects.get(pk=job["job"].pk)
        Subscription.objects.filter(topic=topic).delete()
    result = {
        "subscribers": subscribers,
        "notify_topic_call_ms": round(job["call_ms"], 1),
        "fanned_out_s": round(job["fanned_out_s"], 2),
        "fanned_out_per_s": round(subscribers / job["fanned_out_s"]),
        "all_sent_s": round(all_sent_s, 2),
        "sent": sends,
        "job_state": done.state,
        # How long each step held a background slot (the worker's own log): the budget is 1 s, then one chunk.
        "steps": len(steps),
        "step_median_s": round(statistics.median(steps), 3) if steps else None,
        "step_max_s": round(max(steps), 3) if steps else None,
        "job_counts": done.counts,
        "job_rejected": done.rejected,
        "critical_rate_per_s": rate,
        "critical_warm_up_s": warm,
        "critical_idle_sent": f"{len(idle)}/{idle_sent}",
        "critical_idle_p50_ms": round(percentile(idle, 50), 1),
        "critical_idle_p99_ms": round(percentile(idle, 99), 1),
        "critical_fanout_sent": f"{len(loaded)}/{loaded_sent}",
        "critical_fanout_p50_ms": round(percentile(loaded, 50), 1),
        "critical_fanout_p99_ms": round(percentile(loaded, 99), 1),
    }
    result.update(
        control_drained_s=round(control_s, 2),
        critical_control_sent=f"{len(control)}/{control_sent}",
        critical_control_p50_ms=round(percentile(control, 50), 1),
        critical_control_p99_ms=round(percentile(control, 99), 1),
    )
    result["critical_p99_fanout_vs_idle"] = round(result["critical_fanout_p99_ms"] / result["critical_idle_p99_ms"], 2)
    result["critical_p99_control_vs_idle"] = round(
        result["critical_control_p99_ms"] / result["critical_idle_p99_ms"], 2
    )
    result["critical_p99_fanout_vs_control"] = round(
        result["critical_fanout_p99_ms"] / result["critical_control_p99_ms"], 2
    )
    return result


def _step_seconds(log):
    """The run time of every fan-out step that did work, from a worker's log (Celery's "succeeded in" lines)."""
    found = re.findall(r"sluice\.topics\.fanout_step\[[^\]]+\] succeeded in ([0-9.]+)s: (\d+)", log)
    return [float(seconds) for seconds, _users in found]


def _state(pk):
    return TopicFanout.objects.filter(pk=pk).values_list("state", flat=True).first()


def fill(client, pks, prefix, chunk=1000):
    """One background send of board.updated for each of ``pks``, pushed straight onto the queue (no admission)."""
    for start in range(0, len(pks), chunk):
        messages = []
        for i, pk in enumerate(pks[start : start + chunk], start):
            nid = f"{prefix}{i}"
            kwargs = {"notification_id": nid, "kind": "board.updated", "user_id": pk, "entity_id": nid, "payload": {}}
            messages.append(envelope("sluice.send.background", nid, json.dumps(kwargs), "background", "{}"))
        client.lpush("background", *messages)


def _drained(client):
    """Nothing waits in the background queue, nor is held by a fetch (cheap: never reads the sent records)."""
    if client.llen("background"):
        return False
    return not any(client.llen(key) for key in client.scan_iter(f"{keys.fetch_prefix()}*:processing:*"))


def _pushed(client):
    """Subscribers' sends recorded by the provider so far."""
    return sum(1 for raw in client.lrange(SENT_KEY, 0, -1) if b'"board.updated"' in raw)
