"""bench cost: what one notification costs end to end, per class and outcome, beside a bare Celery no-op.

Every batch is produced first (no worker running) and parked under a hold name; a worker of the class then
starts, its idle cost is measured, and the batches are put back one at a time and drained. So the producer's
side (admission) and the worker's side (fetched, gated, claimed, sent, finished, counted) are measured apart,
each with Redis's own commands and CPU, and the no-op batches drain in the same worker, interleaved (critical
sends one message at a time, routine in batches).
"""

import json
import os
import statistics
import time

from django.contrib.auth import get_user_model
from django.test import override_settings

from notifications import Outcome, notify
from pipeline.broker.queues import queue_for_class
from pipeline.conf import queue_lists
from pipeline.connections import get_redis
from pipeline.redis import keys
from sluice_tools.processes import WorkerProcess

from .meter import Snapshot, minus_idle, per_event
from .noop import noop

LOCMEM = "notifications.channels.locmem.LocmemChannel"
# One channel per kind, so one event is one send; a gate with a rate that never binds, so every send is gated.
CHANNELS = {name: {"backend": LOCMEM, "rate_per_s": 1_000_000} for name in ("email", "sms", "push")}
KINDS = {f"cost.{klass}": {"class": klass, "channels": ["email"]} for klass in ("critical", "routine", "background")}
PAYLOAD = {"title": "Quarterly report move", "due": "2026-12-01", "by": "Ada"}
# Events per fold key in the folded and collapsed batches: each digest then carries this many events.
PER_KEY = 4
USERS = 50
IDLE_S = 2.0
UNACKED = "unacked"


def lists(klass):
    return queue_lists(queue_for_class(klass))


def hold(client, klass, tag):
    """Park the class queue's lists under ``tag`` so no worker takes them yet."""
    for name in lists(klass):
        if client.exists(name):
            client.rename(name, keys.bench("hold", tag, name))


def release(client, klass, tag):
    for name in lists(klass):
        held = keys.bench("hold", tag, name)
        if client.exists(held):
            client.rename(held, name)


def drained(client, klass):
    return not any(client.llen(name) for name in lists(klass)) and not client.hlen(UNACKED)


class Run:
    """One bench cost run against one Redis: produce, hold, drain and measure."""

    #: How often a drain is checked for its end.
    poll_s = 0.005
    #: The workers' channels.
    channels = CHANNELS

    def __init__(self, redis_url, events, rounds, stdout):
        self.url, self.events, self.rounds, self.out = redis_url, events, rounds, stdout
        self.client = get_redis()
        self.users = [get_user_model()(pk=n) for n in range(1, USERS + 1)]
        self.serial = 0

    def queues(self, capacity):
        return {klass: {"capacity": capacity} for klass in ("critical", "routine", "background")}

    def produce(self, klass, count, per_key=1, expect=Outcome.ACCEPTED):
        """notify() ``count`` times; measured on the producer's side. Returns the per-event figures."""
        before = self.snapshot({"producer": os.getpid()})
        outcomes = {}
        self.serial += 1
        for i in range(count):
            # Fold keys spread over USERS users: one user's keys are bounded (coarser grains past the bound).
            key = i // per_key
            user = self.users[key % len(self.users)]
            outcome = notify(user, f"cost.{klass}", entity_id=f"e{self.serial}-{key}", payload=PAYLOAD)
            outcomes[outcome.value] = outcomes.get(outcome.value, 0) + 1
        delta = before.until(self.snapshot({"producer": os.getpid()}))
        if outcomes != {expect.value: count}:
            raise RuntimeError(f"expected {count} {expect.value}, got {outcomes}")
        return self.per_event(delta, count)

    def noop_batch(self, klass, count):
        before = Snapshot(self.client, {"producer": os.getpid()})
        for _ in range(count):
            noop.apply_async(queue=queue_for_class(klass))
        return per_event(before.until(Snapshot(self.client, {"producer": os.getpid()})), count)

    # What a subclass measuring several Redis (bench cluster) replaces: the counters, the figures of a stretch less
    # the idle worker's, and where the class's queue and the worker's heartbeats are.
    def snapshot(self, pids):
        return Snapshot(self.client, pids)

    def per_event(self, delta, events):
        return per_event(delta, events)

    def minus_idle(self, delta, idle):
        return minus_idle(delta, idle)

    def hold(self, klass, tag):
        hold(self.client, klass, tag)

    def release(self, klass, tag):
        release(self.client, klass, tag)

    def drained(self, klass):
        return drained(self.client, klass)

    def forget_heartbeats(self):
        for stale in self.client.keys(keys.fetch_alive("*")):
            self.client.delete(stale)  # a stopped worker's heartbeat, not this one's

    def heartbeating(self):
        return bool(self.client.keys(keys.fetch_alive("*")))

    def worker_env(self):
        """The environment a worker of this run starts with."""
        return {"SLUICE_KINDS": json.dumps(KINDS)}

    def worker(self, klass):
        env = self.worker_env()
        # WARNING, as in production: INFO logs two lines a task, a cost of its own. It also hides " ready.", so
        # the worker is up once its consumer has said it is alive.
        process = WorkerProcess(
            klass, self.url, self.channels, extra=["-I", "sluice_tools.bench.noop"], env=env, loglevel="WARNING"
        )
        process.ready_text = None
        self.forget_heartbeats()
        process.start()
        deadline = time.monotonic() + 60
        while not self.heartbeating():
            if process.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the {klass} worker did not start: {process.output()[-2000:]}")
            time.sleep(0.1)
        return process

    def drain(self, klass, batches, worker):
        """Start from parked ``batches`` [(tag, events)]: measure the idle worker, then release each batch and
        measure its drain. Returns {tag: per-event figures + throughput}."""
        pids = {"worker": worker.process.pid}
        time.sleep(1.0)
        start = self.snapshot(pids)
        time.sleep(IDLE_S)
        idle = start.until(self.snapshot(pids))
        results = {}
        for tag, events in batches:
            before = self.snapshot(pids)
            self.release(klass, tag)
            deadline = time.monotonic() + 300
            while not self.drained(klass):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{tag} did not drain in 300 s: {worker.output()[-2000:]}")
                time.sleep(self.poll_s)
            delta = self.minus_idle(before.until(self.snapshot(pids)), idle)
            results[tag] = {**self.per_event(delta, events), "per_s": round(events / delta["seconds"], 1)}
        return results

    def accepted(self, klass):
        """Critical or background: accepted events, produced, then drained by the class's worker."""
        with override_settings(SLUICE_QUEUES=self.queues(self.events * 4)):
            producer = self.produce(klass, self.events)
        self.hold(klass, "accepted")
        worker = self.worker(klass)
        try:
            drained_ = self.drain(klass, [("accepted", self.events)], worker)["accepted"]
        finally:
            worker.stop()
        return {"producer": producer, "worker": drained_}

    def folded(self, klass):
        """Routine folded or background collapsed against a full queue, then the flush, then its digests sent."""
        expect = Outcome.FOLDED if klass == "routine" else Outcome.COLLAPSED
        # The queue full at a capacity of ``events``: the fold store's bound follows the capacities, so this
        # leaves room for every fold key at the entity grain.
        with override_settings(SLUICE_QUEUES=self.queues(self.events)):
            self.produce(klass, self.events)
            used = self.client.info("memory")["used_memory"]
            producer = self.produce(klass, self.events, PER_KEY, expect)
            fold_bytes = self.client.info("memory")["used_memory"] - used
        for name in lists(klass):
            self.client.delete(name)  # the fill, not measured
        fold_keys = self.client.zcard(keys.pending())
        with override_settings(SLUICE_QUEUES=self.queues(self.events * 4)):
            from digest.flush import run_flush

            before = Snapshot(self.client, {"producer": os.getpid()})
            published = run_flush("bench")
            flush = per_event(before.until(Snapshot(self.client, {"producer": os.getpid()})), published)
        if not published:
            raise RuntimeError(f"the flush published nothing for {fold_keys} fold keys")
        hold(self.client, klass, "digest")
        worker = self.worker(klass)
        try:
            sent = self.drain(klass, [("digest", published)], worker)["digest"]
        finally:
            worker.stop()
        return {
            "producer": producer,
            "flush_per_digest": flush,
            "worker_per_digest": sent,
            "events_per_digest": round(self.events / published, 2),
            "fold_bytes_per_key": round(fold_bytes / fold_keys),
            "fold_bytes_per_event": round(fold_bytes / self.events),
        }

    def against_noop(self, klass):
        """Sends of ``klass`` accepted and the no-op, ``rounds`` batches each, parked, then drained alternately by
        one worker of the class (its profile's pool and concurrency). Routine's worker sends in batches; a
        critical send is always a batch of one, so critical's ratio is the single send's cost."""
        batches, producer, noop_producer = [], [], []
        used_before = self.client.info("memory")["used_memory"]
        message_bytes = None
        with override_settings(SLUICE_QUEUES=self.queues(self.events * 4)):
            for n in range(self.rounds):
                producer.append(self.produce(klass, self.events))
                if message_bytes is None:
                    message_bytes = (self.client.info("memory")["used_memory"] - used_before) / self.events
                hold(self.client, klass, f"sluice{n}")
                batches.append((f"sluice{n}", self.events))
                noop_producer.append(self.noop_batch(klass, self.events))
                hold(self.client, klass, f"noop{n}")
                batches.append((f"noop{n}", self.events))
        worker = self.worker(klass)
        try:
            results = self.drain(klass, batches, worker)
        finally:
            worker.stop()
        sluice = [results[f"sluice{n}"] for n in range(self.rounds)]
        bare = [results[f"noop{n}"] for n in range(self.rounds)]
        return {
            "producer": producer[len(producer) // 2],
            "worker": _median_round(sluice),
            "noop_producer": noop_producer[len(noop_producer) // 2],
            "noop_worker": _median_round(bare),
            "sluice_per_s_rounds": [r["per_s"] for r in sluice],
            "noop_per_s_rounds": [r["per_s"] for r in bare],
            "throughput_ratio_vs_noop": round(
                statistics.median(r["per_s"] for r in sluice) / statistics.median(r["per_s"] for r in bare), 2
            ),
            "bytes_per_admitted_message": round(message_bytes),
        }


def _median_round(rounds):
    """The round of median throughput (its commands and CPU with it)."""
    return sorted(rounds, key=lambda r: r["per_s"])[len(rounds) // 2]


def run(redis_url, events, rounds, stdout):
    """Every class and outcome, and the routine worker against the no-op; returns the report."""
    client = get_redis()
    client.config_resetstat()
    with override_settings(SLUICE_KINDS=KINDS, SLUICE_CHANNELS=CHANNELS):
        bench = Run(redis_url, events, rounds, stdout)
        report = {}
        stdout.write("critical accepted against a bare Celery no-op, side by side (a single send each)")
        critical = bench.against_noop("critical")
        stdout.write("routine accepted against a bare Celery no-op, side by side (batches)")
        routine = bench.against_noop("routine")
        report["critical"] = {"accepted": critical}
        report["routine"] = {"accepted": routine}
        stdout.write("background accepted")
        report["background"] = {"accepted": bench.accepted("background")}
        stdout.write("routine folded, then flushed and sent as digests")
        report["routine"]["folded"] = bench.folded("routine")
        stdout.write("background collapsed, then flushed and sent")
        report["background"]["collapsed"] = bench.folded("background")
    return {
        "events_per_batch": events,
        "rounds": rounds,
        "classes": report,
        "throughput_ratio_vs_noop": routine["throughput_ratio_vs_noop"],
        "critical_vs_noop": critical["throughput_ratio_vs_noop"],
    }
