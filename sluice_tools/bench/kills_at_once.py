"""bench kills --pods N --at-once: N worker pods (process groups) of routine and background, busy with batches, are
kill -9ed at the same instant while events keep arriving; each dead consumer's messages are timed back to their
queue against the reaper's documented bound, and then every accepted event is looked for among the sends.

Two pods, one of each class, survive the kill: their reapers are the only ones left, as after a node dies. Once the
dead pods' messages are back, replacements start (with a fast provider, so the backlog drains), as a Deployment
would start them.
"""

import json
import os
import signal
import time

from pipeline.broker import reaper
from pipeline.connections import get_redis
from pipeline.redis import keys

from ..processes import WorkerProcess
from .kills import Producer, summarize
from .provider import sent_records

PROVIDER = "sluice_tools.bench.provider.SimulatedProvider"
KINDS = {
    "task.comment": {"class": "routine", "channels": ["push"]},
    "board.updated": {"class": "background", "channels": ["push"]},
}
QUEUES = ("routine", "background")
DEAD_AFTER_S = 5
# A send killed mid-way leaves its claim until it expires; the claim follows the visibility timeout.
VISIBILITY_S = 10
# Slow sends before the kill, so every pod's slots are inside batches when it dies.
BUSY_LATENCY_MS = 1000
SLOTS = 2


def start_pod(klass, redis_url, env, latency_ms):
    channels = {name: {"backend": PROVIDER, "options": {"latency_ms": latency_ms}} for name in ("email", "sms", "push")}
    worker = WorkerProcess(
        klass,
        redis_url,
        extra=["--concurrency", str(SLOTS)],
        env={**env, "SLUICE_CHANNELS": json.dumps(channels)},
        loglevel="WARNING",
    )
    worker.ready_text = None  # started together; run() waits for them all
    worker.new_session = True
    return worker.start()


def ready(client, pods, timeout=300):
    """Wait until every pod fetches: its fetch consumer registered itself (at WARNING, Celery says nothing)."""
    deadline = time.monotonic() + timeout
    while {int(c.decode().split(":")[1]) for c in client.smembers(keys.fetch_consumers())} < {
        pod.process.pid for pod in pods
    }:
        dead = [pod for pod in pods if pod.process.poll() is not None]
        if dead or time.monotonic() > deadline:
            raise RuntimeError(f"worker pods not ready: {dead[0].output() if dead else 'timeout'}")
        time.sleep(0.5)


def holdings(client, pids):
    """{consumer: (its processing lists, its tags key)} for every registered consumer of the processes ``pids``."""
    found = {}
    for raw in client.smembers(keys.fetch_consumers()):
        consumer = raw.decode()
        if int(consumer.split(":")[1]) in pids:
            sources = [s.decode() for s in client.smembers(keys.fetch_sources(consumer))]
            found[consumer] = ([keys.fetch_processing(consumer, s) for s in sources], keys.fetch_tags(consumer))
    return found


def held(client, holding):
    """{consumer: messages it holds (processing lists and delivery tags)}, in one round trip."""
    pipe = client.pipeline(transaction=False)
    for lists, tags in holding.values():
        for name in lists:
            pipe.llen(name)
        pipe.scard(tags)
    replies = iter(pipe.execute())
    return {consumer: sum(next(replies) for _ in range(len(lists) + 1)) for consumer, (lists, _t) in holding.items()}


def batches_busy(client, pids):
    """How many of the pods ``pids`` have a batch consumer holding messages."""
    holding = holdings(client, pids)
    counts = held(client, {c: h for c, h in holding.items() if ":batch-" in c})
    return len({int(c.split(":")[1]) for c, n in counts.items() if n})


def run(redis_url, pods, seed, stdout):
    """Kill ``pods`` pods at once under load; return the figures."""
    env = {
        "SLUICE_KINDS": json.dumps(KINDS),
        "SLUICE_QUEUES": json.dumps({"routine": {"capacity": 100_000}, "background": {"capacity": 100_000}}),
        "SLUICE_FETCH_DEAD_AFTER_S": str(DEAD_AFTER_S),
        "SLUICE_VISIBILITY_TIMEOUT_S": str(VISIBILITY_S),
    }
    from django.test import override_settings

    client = get_redis()
    client.flushdb()  # this run's sends and registry only (the bench's own Redis, or a test's)
    bound = reaper.bound_s(DEAD_AFTER_S)
    with override_settings(SLUICE_KINDS=KINDS, SLUICE_QUEUES=json.loads(env["SLUICE_QUEUES"])):
        victims = [start_pod(QUEUES[n % 2], redis_url, env, BUSY_LATENCY_MS) for n in range(pods)]
        survivors = [start_pod(klass, redis_url, env, BUSY_LATENCY_MS) for klass in QUEUES]
        everyone = victims + survivors
        producer = Producer(seed, first="task.comment", second="board.updated", share=0.5)
        began = time.time()
        try:
            ready(client, everyone)
            stdout.write(f"  {len(everyone)} pods ready in {time.time() - began:.0f} s")
            producer.start()
            pids = {pod.process.pid for pod in victims}
            # Busy with batches: wait until most victims hold a batch (every one, or 20 s at most).
            deadline = time.monotonic() + 20
            while batches_busy(client, pids) < len(victims) and time.monotonic() < deadline:
                time.sleep(0.2)
            busy = batches_busy(client, pids)
            for pod in victims:
                os.killpg(pod.process.pid, signal.SIGKILL)
            killed_at = time.time()
            holding = holdings(client, pids)
            at_kill = held(client, holding)
            for pod in victims:
                pod.process.wait(10)
            returned = {c: None for c, n in at_kill.items() if n}
            while any(at is None for at in returned.values()) and time.time() - killed_at < 3 * bound:
                now_held = held(client, {c: holding[c] for c, at in returned.items() if at is None})
                now = time.time()
                for consumer, n in now_held.items():
                    if n == 0:
                        returned[consumer] = now - killed_at
                time.sleep(0.05)
            stdout.write(
                f"  {len(victims)} pods killed ({busy} inside batches): {sum(at_kill.values())} messages held by "
                f"{len(returned)} consumers; slowest back after "
                f"{max((a for a in returned.values() if a is not None), default=0):.2f} s (bound {bound:.2f} s)"
            )
            replacements = [start_pod(QUEUES[n % 2], redis_url, env, 5) for n in range(4)]
            everyone += replacements
            time.sleep(3)  # traffic keeps flowing while the replacements start
            producer.stop.set()
            producer.join(10)
            drain_deadline = time.monotonic() + 240
            while time.monotonic() < drain_deadline and not settled(client):
                time.sleep(0.5)
            time.sleep(2)  # the last sends record
            drained = settled(client)
        finally:
            producer.stop.set()
            for pod in everyone:
                pod.stop()
    killer = _Kills([(killed_at, pod.process.pid, "at once") for pod in victims])
    result = summarize(producer, killer, sent_records(), drained, time.time() - began)
    slowest = max((a for a in returned.values() if a is not None), default=None)
    result.update(
        pods_killed=len(victims),
        pods_inside_batches_at_kill=busy,
        consumers_holding_at_kill=len(returned),
        batch_consumers_holding_at_kill=sum(1 for c in returned if ":batch-" in c),
        messages_held_at_kill=sum(at_kill.values()),
        not_back=[c for c, at in returned.items() if at is None],
        slowest_back_s=round(slowest, 2) if slowest is not None else None,
        back_s=sorted(round(a, 2) for a in returned.values() if a is not None),
        bound_s=bound,
        fetch_dead_after_s=DEAD_AFTER_S,
    )
    return result


class _Kills:
    """What summarize() reads from bench kills' Killer: the kills as (time, process group, how)."""

    def __init__(self, kills):
        self.kills = kills


def settled(client):
    """Nothing left anywhere: queues, processing lists, unacked."""
    lists = sum(client.llen(q) for q in QUEUES)
    processing = sum(client.llen(k) for k in client.scan_iter(f"{keys.fetch_prefix()}*:processing:*"))
    return lists == 0 and processing == 0 and client.hlen("unacked") == 0
