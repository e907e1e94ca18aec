"""bench kills: whole worker process groups are kill -9ed at random instants, and inside fetches, while
producers keep admitting events; then every accepted event is looked for among the sends.

Some workers run with a hook between a fetch and its record (pause_in_fetch, installed by
sluice_tools.fetch_hook): every few fetches they mark a file and pause, and the killer kills them there,
with the message neither in the queue nor recorded as delivered. The others are killed at random instants,
so kills land in the BLMOVE, in a send, between a provider's return and the send's record, and in the
milliseconds in which events keep arriving.

A duplicate is attributed when its first copy's worker was killed after the provider returned that copy:
the send went out, and the kill came before "sent" was recorded.
"""

import json
import os
import random
import signal
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

from django.contrib.auth import get_user_model

from notifications import notify
from pipeline.connections import get_redis
from pipeline.redis import keys

from ..processes import WorkerProcess
from .provider import sent_records

PROVIDER = "sluice_tools.bench.provider.SimulatedProvider"
KINDS = {
    "meeting.reminder": {"class": "critical", "channels": ["push"]},
    "task.comment": {"class": "routine", "channels": ["push"]},
}
POOLS = (("critical", 2), ("routine", 4), ("critical", 2), ("routine", 4))  # class, slots, per worker
HOOKED = (0, 1)  # these workers pause inside some fetches
DEAD_AFTER_S = 3
# A send killed mid-way leaves its claim until it expires; the claim follows the visibility timeout.
VISIBILITY_S = 10
RATE_PER_S = 120


def pause_in_fetch(source):
    """The hook: on every SLUICE_HOOK_EVERY-th fetch, write this pid to SLUICE_HOOK_MARK and pause."""
    count = pause_in_fetch.count = getattr(pause_in_fetch, "count", 0) + 1
    if count % int(os.environ.get("SLUICE_HOOK_EVERY", "10")) == 0:
        with Path(os.environ["SLUICE_HOOK_MARK"]).open("a") as mark:
            mark.write(f"{os.getpid()}\n")
        time.sleep(3)


class Producer(threading.Thread):
    """notify() at about RATE_PER_S, one new entity per event, remembering every accepted one: ``first`` for a
    ``share`` of the events, ``second`` for the rest."""

    def __init__(self, seed, first="meeting.reminder", second="task.comment", share=0.3):
        super().__init__(daemon=True)
        self.stop = threading.Event()
        self.accepted, self.other = [], Counter()
        self.rng = random.Random(seed)
        self.first, self.second, self.share = first, second, share

    def run(self):
        user = get_user_model()(pk=1)
        seq = 0
        while not self.stop.is_set():
            seq += 1
            kind = self.first if self.rng.random() < self.share else self.second
            outcome = str(notify(user, kind, entity_id=f"e{seq}", payload={"t0": time.time()}))
            if outcome == "accepted":
                self.accepted.append(f"e{seq}")
            else:
                self.other[outcome] += 1
            time.sleep(1 / RATE_PER_S)


class Killer:
    """Keeps the workers running, and kills one process group at a time until ``kills`` are done."""

    def __init__(self, redis_url, env, mark, seed):
        self.redis_url, self.env, self.mark = redis_url, env, mark
        self.rng = random.Random(seed)
        self.workers = [self.start(i) for i in range(len(POOLS))]
        self.kills = []  # (time, pid, "fetch" or "random")
        self._marks_read = 0

    def start(self, slot):
        klass, slots = POOLS[slot]
        hook = f"{__name__}.pause_in_fetch" if slot in HOOKED else None
        worker = WorkerProcess(
            klass,
            self.redis_url,
            extra=["--concurrency", str(slots)],
            env=self.env,
            loglevel="WARNING",
            fetch_hook=hook,
        )
        worker.ready_text = None  # not waited for: events keep arriving while a replacement starts
        worker.new_session = True
        worker.slot = slot
        return worker.start()

    def marked(self):
        """Pids that have just paused inside a fetch."""
        lines = self.mark.read_text().split() if self.mark.exists() else []
        fresh, self._marks_read = lines[self._marks_read :], len(lines)
        return {int(pid) for pid in fresh}

    def kill_one(self):
        paused = self.marked()
        victim = next((w for w in self.workers if w.process.pid in paused), None)
        how = "fetch"
        if victim is None:
            time.sleep(self.rng.uniform(0.05, 1.0))
            paused = self.marked()
            victim = next((w for w in self.workers if w.process.pid in paused), None)
            if victim is None:
                victim, how = self.rng.choice(self.workers), "random"
        os.killpg(victim.process.pid, signal.SIGKILL)
        self.kills.append((time.time(), victim.process.pid, how))
        victim.process.wait(10)
        self.workers[self.workers.index(victim)] = self.start(victim.slot)

    def stop(self):
        for worker in self.workers:
            worker.stop()


def settled(client):
    """Nothing left anywhere: queues, processing lists, unacked, registered consumers' holdings."""
    lists = sum(client.llen(q) for q in ("critical", "routine"))
    processing = sum(client.llen(k) for k in client.scan_iter(f"{keys.fetch_prefix()}*:processing:*"))
    return lists == 0 and processing == 0 and client.hlen("unacked") == 0


def run(redis_url, kills, seed, stdout):
    """Run ``kills`` kills under load; return the figures."""
    mark = Path(tempfile.mkdtemp(prefix="sluice-kills-")) / "marks"
    channels = {name: {"backend": PROVIDER, "options": {"latency_ms": 20}} for name in ("email", "sms", "push")}
    env = {
        "SLUICE_KINDS": json.dumps(KINDS),
        "SLUICE_CHANNELS": json.dumps(channels),
        "SLUICE_QUEUES": json.dumps({"critical": {"capacity": 100_000}, "routine": {"capacity": 100_000}}),
        "SLUICE_FETCH_DEAD_AFTER_S": str(DEAD_AFTER_S),
        "SLUICE_VISIBILITY_TIMEOUT_S": str(VISIBILITY_S),
        "SLUICE_HOOK_MARK": str(mark),
        "SLUICE_HOOK_EVERY": "15",
    }
    from django.test import override_settings

    with override_settings(SLUICE_KINDS=KINDS, SLUICE_QUEUES=json.loads(env["SLUICE_QUEUES"])):
        killer = Killer(redis_url, env, mark, seed)
        producer = Producer(seed)
        began = time.time()
        try:
            time.sleep(3)
            producer.start()
            while len(killer.kills) < kills:
                killer.kill_one()
                if len(killer.kills) % 10 == 0:
                    stdout.write(f"  {len(killer.kills)}/{kills} kills, {len(producer.accepted)} events accepted")
            producer.stop.set()
            producer.join(10)
            client = get_redis()
            deadline = time.monotonic() + 180
            while time.monotonic() < deadline and not settled(client):
                time.sleep(0.5)
            time.sleep(2)  # the last sends record
            drained = settled(client)
            leftover = {
                "lists": {q: client.llen(q) for q in ("critical", "routine")},
                "processing": sum(client.llen(k) for k in client.scan_iter(f"{keys.fetch_prefix()}*:processing:*")),
                "unacked_ages_s": sorted(
                    round(time.time() - at, 1) for _tag, at in client.zrange("unacked_index", 0, -1, withscores=True)
                ),
            }
        finally:
            producer.stop.set()
            killer.stop()
    result = summarize(producer, killer, sent_records(), drained, time.time() - began)
    result["leftover"] = leftover
    return result


def summarize(producer, killer, records, drained, seconds):
    """Lost, duplicated (and why), and the kills by kind."""
    by_entity = {}
    for record in records:
        by_entity.setdefault(record["entity_id"], []).append(record)
    lost = [e for e in producer.accepted if e not in by_entity]
    # A kill names the worker's process group (its leader's pid); a copy's sender may be a prefork child in it.
    kills_by_pid = {pid: at for at, pid, _how in killer.kills}
    duplicates = {e: copies for e, copies in by_entity.items() if len(copies) > 1}
    explained = [
        e
        for e, copies in duplicates.items()
        if (group := copies[0].get("pgid", copies[0].get("pid"))) in kills_by_pid
        and copies[0]["done"] <= kills_by_pid[group]
    ]
    return {
        "kills": len(killer.kills),
        "kills_by_how": dict(Counter(how for *_, how in killer.kills)),
        "events_accepted": len(producer.accepted),
        "other_outcomes": dict(producer.other),
        "sends_recorded": len(records),
        "lost": len(lost),
        "lost_entities": lost[:20],
        "duplicated": len(duplicates),
        "duplicated_after_provider_returned": len(explained),
        "duplicated_unexplained": {
            entity: [
                {
                    **{k: copy.get(k) for k in ("pid", "pgid", "started", "done")},
                    "killed_at": kills_by_pid.get(copy.get("pgid", copy.get("pid"))),
                }
                for copy in duplicates[entity]
            ]
            for entity in sorted(set(duplicates) - set(explained))[:20]
        },
        "drained": drained,
        "seconds": round(seconds, 1),
        "python": sys.version.split()[0],
    }
