"""bench incident: replay 9,360 events in 40 s against naive FIFO, Celery priorities on one queue, and Sluice.

Every configuration gets the same 12 worker slots and the same simulated provider (145 ms a send,
so 8 slots send about 55 msg/s, as in the incident), one after another on this machine.
"""

import json
import threading
import time
import uuid
from collections import Counter

from django.contrib.auth import get_user_model
from django.test import override_settings

from notifications import Rejected, notify, notify_many
from notifications.delivery.tasks import send_tasks
from pipeline.broker.depth import snapshot
from pipeline.conf import CLASSES
from pipeline.connections import get_redis
from pipeline.redis import keys
from sluice_tools.demo_kinds import DEMO_KINDS
from sluice_tools.processes import WorkerProcess

from . import traffic
from .common import percentile
from .provider import sent_records

SEND_LATENCY_MS = 145
SLOTS = 12
SLUICE_POOLS = {"critical": 6, "routine": 4, "background": 2}
# capacity = target drain time x pool throughput (DESIGN.md): 37 s of each pool's sending.
TARGET_DRAIN_S = 37
PRIORITY = {"critical": 0, "routine": 6, "background": 9}  # kombu's Redis steps: 0 is served first
CONFIGS = ("naive", "celery_priority", "sluice")
# With --fanout: Sluice again, its producers calling notify_many() for what one action sends to many people.
FANOUT_CONFIG = "sluice_many"
# Events of one kind and entity for several users within this long are one action: one notify_many() call.
ACTION_WINDOW_S = 1.0
DRAIN_EVERY_S = 5  # the overflow drain's PeriodicTask (digest/migrations/0002_beat_schedule.py)
UNBOUNDED = {k: {"capacity": 1_000_000, "ceiling": 1_000_000} for k in CLASSES}


def is_sluice(config):
    return config in ("sluice", FANOUT_CONFIG)


def pool_rate(slots):
    return slots * 1000 / SEND_LATENCY_MS


def sluice_queues(scale=1.0):
    """Capacities of 37 s of each pool's sending; a scaled-down replay scales them too, to keep its shape."""
    return {
        k: {"capacity": max(10, round(TARGET_DRAIN_S * scale * pool_rate(n))), "wait_ms": 250 if k == "critical" else 0}
        for k, n in SLUICE_POOLS.items()
    }


def settings_for(config, flush_interval_s, scale=1.0):
    """The SLUICE_ settings of a configuration: one channel per kind, so one send is one message."""
    provider = {"backend": "sluice_tools.bench.provider.SimulatedProvider", "options": {"latency_ms": SEND_LATENCY_MS}}
    return {
        "SLUICE_CHANNELS": {name: provider for name in ("email", "sms", "push")},
        "SLUICE_KINDS": {name: {**kind, "channels": ["push"]} for name, kind in DEMO_KINDS.items()},
        "SLUICE_QUEUES": sluice_queues(scale) if is_sluice(config) else UNBOUNDED,
        "SLUICE_DIGEST": {"flush_interval_s": flush_interval_s, "max_keys": 200},
    }


class Sampler(threading.Thread):
    """Depth of every queue and Redis memory, twice a second, for the report and its plot."""

    def __init__(self):
        super().__init__(daemon=True)
        self.stop = threading.Event()
        self.points = []
        self.peak_memory = 0

    def run(self):
        client = get_redis()
        while not self.stop.is_set():
            depths = {k: v["depth"] for k, v in snapshot(client).items()}
            memory = client.info("memory")["used_memory"]
            self.peak_memory = max(self.peak_memory, memory)
            self.points.append({"t": time.time(), **depths, "memory": memory})
            self.stop.wait(0.5)


def worker_env(conf, database_url=None):
    """The workers' environment: the configuration's settings, and their own database when given one."""
    env = {name: json.dumps(value) for name, value in conf.items()}
    if database_url:
        env["DATABASE_URL"] = database_url
    return env


def start_workers(config, redis_url, env):
    if is_sluice(config):
        pools = SLUICE_POOLS.items()
    else:
        pools = [("routine", SLOTS)]  # one queue, every class on it, as a user would set it up
        if config == "celery_priority":
            env = {**env, "CELERY_QUEUE_ORDER_STRATEGY": "priority"}
    workers = [WorkerProcess(k, redis_url, extra=["--concurrency", str(n)], env=env) for k, n in pools]
    for worker in workers:
        worker.start()
    return workers


def publish(config, user, klass, kind, entity, outcomes):
    payload = {"t0": time.time(), "title": entity}
    if isinstance(user, list):
        result = notify_many(user, kind, entity_id=entity, payload=payload)
        for outcome, n in result.counts.items():
            outcomes[klass, str(outcome)] += n
        outcomes[klass, "rejected"] += len(result.rejected)
        return
    if is_sluice(config):
        try:
            outcomes[klass, str(notify(user, kind, entity_id=entity, payload=payload))] += 1
        except Rejected:
            outcomes[klass, "rejected"] += 1
        return
    notification_id = uuid.uuid4().hex
    kwargs = {
        "notification_id": notification_id,
        "kind": kind,
        "user_id": user.pk,
        "entity_id": entity,
        "payload": payload,
    }
    options = {"priority": PRIORITY[klass]} if config == "celery_priority" else {}
    send_tasks["routine"].apply_async(kwargs=kwargs, task_id=notification_id, **options)
    outcomes[klass, "accepted"] += 1


def actions(schedule, window_s):
    """``schedule`` with the events of one kind and entity for several users within ``window_s`` of the first
    made one action: (offset of the first, class, kind, [users], entity), published by one notify_many(). What
    concerns one person (a routine event about their own task) stays one notify()."""
    grouped, open_actions = [], {}
    for offset, klass, kind, user, entity in schedule:
        key = (kind, entity)
        found = open_actions.get(key)
        # A user twice in one window is two events: the second starts the next action (every event is kept).
        if found is not None and offset - found[0] <= window_s and user not in found[3]:
            found[3].append(user)
            continue
        action = [offset, klass, kind, [user], entity]
        open_actions[key] = action
        grouped.append(action)
    return [tuple(a) if len(a[3]) > 1 else (a[0], a[1], a[2], a[3][0], a[4]) for a in grouped]


def beat(config, flush, drain, next_flush, next_drain, flush_interval_s):
    """Send what django-celery-beat's two PeriodicTasks send, on their schedule (the flush every interval,
    the drain every 5 s); return the next due times."""
    if is_sluice(config):
        now = time.time()
        if now >= next_flush:
            flush.apply_async(kwargs={"trigger": "beat"})
            next_flush += flush_interval_s
        if now >= next_drain:
            drain.apply_async()
            next_drain += DRAIN_EVERY_S
    return next_flush, next_drain


def drained(client, config):
    depths = snapshot(client)
    if not is_sluice(config):
        # The baselines use one queue; a beat running beside them (the demo's) only fills critical.
        return depths["routine"]["depth"] == 0
    if sum(v["depth"] for v in depths.values()):
        return False
    return not (
        client.zcard(keys.pending())
        or client.zcard(keys.claims())
        or any(client.llen(keys.overflow(k)) for k in CLASSES)
    )


def run_config(config, redis_url, scale, flush_interval_s, progress=None, max_drain_s=900, database_url=None):
    """Replay the incident against one configuration; return its raw results. ``database_url``: the workers'
    database (common.fresh_database), so that no user's stored preferences change the replay."""
    from digest.flush import drain, flush

    client = get_redis()
    client.flushdb()
    conf = settings_for(config, flush_interval_s, scale)
    env = worker_env(conf, database_url)
    sampler = Sampler()
    outcomes, calls = Counter(), 0
    users = {pk: get_user_model()(pk=pk) for pk in range(1, traffic.PARTICIPANTS + 1)}
    warmup = 5.0
    burst_s = traffic.BURST_SECONDS * scale
    schedule = sorted(
        traffic.background(warmup + burst_s + 30) + [(warmup + t, *rest) for t, *rest in traffic.burst(scale)]
    )
    if config == FANOUT_CONFIG:
        schedule = actions(schedule, ACTION_WINDOW_S * scale)
    with override_settings(**conf):
        workers = start_workers(config, redis_url, env)
        try:
            sampler.start()
            started = time.time()
            next_flush = started + flush_interval_s
            next_drain = started + DRAIN_EVERY_S
            next_report = started
            for offset, klass, kind, user, entity in schedule:
                if offset > warmup + burst_s and drained(client, config):
                    break
                delay = started + offset - time.time()
                if delay > 0:
                    time.sleep(delay)
                named = [users[u] for u in user] if isinstance(user, list) else users[user]
                publish(config, named, klass, kind, entity, outcomes)
                calls += 1
                next_flush, next_drain = beat(config, flush, drain, next_flush, next_drain, flush_interval_s)
                if progress and time.time() >= next_report:
                    progress(config, time.time() - started, sampler.points[-1] if sampler.points else {})
                    next_report = time.time() + 1
            deadline = time.time() + max_drain_s
            while not drained(client, config) and time.time() < deadline:
                next_flush, next_drain = beat(config, flush, drain, next_flush, next_drain, flush_interval_s)
                if progress:
                    progress(config, time.time() - started, sampler.points[-1] if sampler.points else {})
                time.sleep(0.5)
            time.sleep(SEND_LATENCY_MS / 1000 * 3)  # the last sends finish
        finally:
            sampler.stop.set()
            for worker in workers:
                worker.stop()
    return {
        "started": started,
        "outcomes": outcomes,
        "records": sent_records(client),
        "samples": sampler.points,
        "redis_peak_bytes": sampler.peak_memory,
        "drained": drained(client, config),
        "calls": calls,
    }


def idle_floor(redis_url, probes=40, database_url=None):
    """Enqueue to send start of single critical events on an idle Sluice critical pool."""
    client = get_redis()
    client.flushdb()
    conf = settings_for("sluice", 60)
    env = worker_env(conf, database_url)
    worker = WorkerProcess("critical", redis_url, extra=["--concurrency", str(SLUICE_POOLS["critical"])], env=env)
    user = get_user_model()(pk=1)
    with override_settings(**conf):
        worker.start()
        try:
            time.sleep(1.0)
            for i in range(probes):
                notify(user, "meeting.reminder", entity_id=f"idle-{i}", payload={"t0": time.time()})
                time.sleep(SEND_LATENCY_MS / 1000 + 0.1)  # the pool is idle again before the next one
            time.sleep(0.5)
        finally:
            worker.stop()
    latencies = [(r["started"] - r["t0"]) * 1000 for r in sent_records(client)]
    return {
        "p50": round(percentile(latencies, 50), 2),
        "p99": round(percentile(latencies, 99), 2),
        "samples": len(latencies),
    }


def summarize(config, raw):
    """Per class: latency p50/p99/max, max depth, sent; then folded %, rejected, lost, Redis peak."""
    records = {r["id"]: r for r in raw["records"]}.values()  # one record per notification
    outcomes = raw["outcomes"]
    result = {}
    lost = 0
    for klass in CLASSES:
        mine = [r for r in records if r["class"] == klass]
        latencies = [(r["started"] - r["t0"]) * 1000 for r in mine if r["t0"]]
        queue = klass if is_sluice(config) else "routine"
        singles = sum(1 for r in mine if not r["id"].startswith("digest-"))
        in_digests = sum(r["count"] for r in mine if r["id"].startswith("digest-"))
        total = sum(v for (k, _), v in outcomes.items() if k == klass)
        lost += total - singles - in_digests - outcomes[klass, "rejected"]
        result[klass] = {
            "p50_ms": round(percentile(latencies, 50), 1) if latencies else None,
            "p99_ms": round(percentile(latencies, 99), 1) if latencies else None,
            "max_ms": round(max(latencies), 1) if latencies else None,
            "sent": len(mine),
            "events": total,
            "max_depth": max((p[queue] for p in raw["samples"]), default=0),
        }
    routine_total = sum(v for (k, _), v in outcomes.items() if k == "routine")
    # What a person receives: routine's events in per message out (one digest per user and channel per flush).
    routine_sent = result["routine"]["sent"]
    result["routine"]["events_per_message"] = round(routine_total / routine_sent, 2) if routine_sent else None
    result["folded_pct"] = round(100 * outcomes["routine", "folded"] / routine_total, 1) if routine_total else 0.0
    result["rejected"] = sum(v for (_, o), v in outcomes.items() if o == "rejected")
    result["lost"] = lost
    result["redis_peak_bytes"] = raw["redis_peak_bytes"]
    result["drained"] = raw["drained"]
    return result
