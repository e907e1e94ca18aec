"""bench soak: sustained overload for N minutes; Redis memory, the RSS of every process, and critical p99.

The incident's provider (145 ms a send) and bulk pools (routine 4, background 2 slots). The bulk of the
traffic (routine and background, 94% of events) is offered at ``rate_multiplier`` x what those pools can
send, mixed 6/80/14, so critical arrives at its 6% share of that. The critical pool is sized for latency
as in the incident (utilisation about 0.4 at its offered rate: 10 slots at 10x), because a pool run at
0.64 misses a 100 ms p99 by queueing alone. Send records are moved out of Redis into this process as they
come, so what Redis holds is what the pipeline holds. The workers get a fresh database of their own, so
the opt-outs of whatever database the project points at do not change the run.
"""

import json
import math
import random
import tempfile
import threading
import time
from collections import Counter

import psutil
from django.contrib.auth import get_user_model
from django.test import override_settings

from notifications import Rejected, notify
from pipeline.conf import CLASSES

from ..processes import WorkerProcess
from .common import fresh_database, percentile
from .incident import SEND_LATENCY_MS, SLUICE_POOLS, TARGET_DRAIN_S, drained, pool_rate, settings_for
from .provider import SENT_KEY
from .traffic import BOARDS, MIX, PARTICIPANTS, TASKS_PER_PARTICIPANT

CRITICAL_P99_TARGET_MS = 100  # the incident's target, enqueue to send start
CRITICAL_RHO = 0.4  # the critical pool's utilisation at its offered rate, as in the incident (14/s on 6)
FLUSH_INTERVAL_S = 15
SAMPLE_EVERY_S = 2.0
FLAT_PCT = 10  # growth from the first to the last minute still called flat
MB = 1024 * 1024


def offered_rate(rate_multiplier):
    """Events per second such that routine + background (94%) get ``rate_multiplier`` x their pools."""
    bulk_share = sum(share for klass, _, share in MIX if klass != "critical")
    bulk_capacity = pool_rate(SLUICE_POOLS["routine"]) + pool_rate(SLUICE_POOLS["background"])
    return rate_multiplier * bulk_capacity / bulk_share


def pools_for(rate):
    """Slots per class: the incident's bulk pools, and a critical pool sized for CRITICAL_RHO."""
    critical_share = next(share for klass, _, share in MIX if klass == "critical")
    critical = math.ceil(rate * critical_share * SEND_LATENCY_MS / 1000 / CRITICAL_RHO)
    return {**SLUICE_POOLS, "critical": max(SLUICE_POOLS["critical"], critical)}


def queues_for(pools):
    """Capacities of 37 s of each pool's sending (capacity = target drain time x throughput)."""
    return {
        k: {"capacity": round(TARGET_DRAIN_S * pool_rate(n)), "wait_ms": 250 if k == "critical" else 0}
        for k, n in pools.items()
    }


def events(seed=11):
    """An endless stream of (class, kind, user, entity) with the incident's mix and fold keys."""
    rng = random.Random(seed)
    classes = [(klass, kinds) for klass, kinds, _ in MIX]
    weights = [share for *_, share in MIX]
    while True:
        klass, kinds = rng.choices(classes, weights)[0]
        user = rng.randint(1, PARTICIPANTS)
        entity = {
            "critical": "meeting-weekly",
            "routine": f"task-{user}-{rng.randint(1, TASKS_PER_PARTICIPANT)}",
            "background": f"board-{rng.randint(1, BOARDS)}",
        }[klass]
        yield klass, rng.choice(kinds), user, entity


class Sampler(threading.Thread):
    """Every few seconds: Redis memory, every worker process's RSS, queue depths; and the send records,
    moved out of Redis into this process."""

    def __init__(self, client, workers):
        super().__init__(daemon=True)
        self.client = client
        self.workers = workers
        self.stop = threading.Event()
        self.points = []
        self.sends = []  # (id, class, count, latency ms or None, send start)
        redis_pid = client.info("server").get("process_id")
        self.redis = psutil.Process(redis_pid) if redis_pid and psutil.pid_exists(redis_pid) else None

    def processes(self):
        found = {}
        for worker in self.workers:
            try:
                main = psutil.Process(worker.process.pid)
                found[(worker.klass, "main", main.pid)] = main
                for child in main.children(recursive=True):
                    found[(worker.klass, "child", child.pid)] = child
            except psutil.NoSuchProcess:
                continue
        if self.redis:
            found[("redis-server", "", self.redis.pid)] = self.redis
        me = psutil.Process()
        found[("bench driver", "", me.pid)] = me
        return found

    def take_records(self):
        pipe = self.client.pipeline(transaction=True)
        pipe.lrange(SENT_KEY, 0, -1)
        pipe.delete(SENT_KEY)
        raw, _ = pipe.execute()
        for line in raw:
            r = json.loads(line)
            latency = (r["started"] - r["t0"]) * 1000 if r["t0"] else None
            self.sends.append((r["id"], r["class"], r["count"], latency, r["started"]))

    def sample(self):
        from pipeline.broker.depth import snapshot

        self.take_records()
        memory = self.client.info("memory")
        rss, cpu = {}, {}
        for key, process in self.processes().items():
            name = "|".join(map(str, key))
            try:
                with process.oneshot():
                    rss[name] = process.memory_info().rss
                    times = process.cpu_times()
                    cpu[name] = times.user + times.system
            except psutil.NoSuchProcess:
                continue
        self.points.append(
            {
                "t": time.time(),
                "used_memory": memory["used_memory"],
                "sends": len(self.sends),
                "rss": rss,
                "cpu": cpu,
                **{k: v["depth"] for k, v in snapshot(self.client).items()},
            }
        )

    def run(self):
        while not self.stop.is_set():
            self.sample()
            self.stop.wait(SAMPLE_EVERY_S)


def mean(values):
    values = list(values)
    return sum(values) / len(values) if values else None


def growth(first, last):
    return round(100 * (last - first) / first, 1) if first else None


def family(key):
    """A key's family: ids stripped, so one family is one kind of data (sluice:sent, sluice:digest:fold...)."""
    parts = key.decode(errors="replace").split(":")
    if parts[0] != "sluice":
        return parts[0] if len(parts) == 1 else f"{parts[0]}:*"
    return ":".join(parts[:3] if parts[1] == "digest" else parts[:2])


def memory_breakdown(client, batch=500):
    """Where Redis's memory is: bytes and key count per key family, and INFO's own split (dataset, overhead,
    clients, scripts)."""
    families = {}
    scanned = list(client.scan_iter(count=1000))
    for start in range(0, len(scanned), batch):
        chunk = scanned[start : start + batch]
        pipe = client.pipeline(transaction=False)
        for key in chunk:
            pipe.memory_usage(key, samples=0)
        for key, size in zip(chunk, pipe.execute(), strict=True):
            entry = families.setdefault(family(key), {"keys": 0, "bytes": 0})
            entry["keys"] += 1
            entry["bytes"] += size or 0
    info = client.info("memory")
    fields = ("used_memory", "used_memory_dataset", "used_memory_overhead", "mem_clients_normal")
    return {
        "families": dict(sorted(families.items(), key=lambda kv: -kv[1]["bytes"])),
        "info": {k: info.get(k) for k in (*fields, "used_memory_scripts", "number_of_cached_scripts")},
    }


def mark_bytes(client):
    """How many "sent" marks (pipeline.broker.marks: fields of the per-minute hashes) Redis holds after the run, and
    the bytes each costs, measured by deleting their hashes: used_memory before minus after, divided by their number."""
    from pipeline.redis import keys

    before = client.info("memory")["used_memory"]
    count, batch = 0, []
    for key in client.scan_iter(match=keys.sent_marks("*", "*"), count=1000):
        batch.append(key)
        if len(batch) == 1000:
            count += _delete_marks(client, batch)
            batch = []
    if batch:
        count += _delete_marks(client, batch)
    after = client.info("memory")["used_memory"]
    return count, (before - after) / count if count else 0.0


def _delete_marks(client, hashes):
    pipe = client.pipeline(transaction=False)
    for key in hashes:
        pipe.hlen(key)
    marks = sum(pipe.execute())
    client.delete(*hashes)
    return marks


def run(redis_url, minutes, rate_multiplier, stdout, max_drain_s=900):
    """Overload the pools for ``minutes``, drain, and return the report (also printed as lines)."""
    from digest.flush import flush
    from pipeline.connections import get_redis

    client = get_redis()
    client.flushdb()
    duration = minutes * 60
    rate = offered_rate(rate_multiplier)
    pools = pools_for(rate)
    conf = {**settings_for("sluice", FLUSH_INTERVAL_S), "SLUICE_QUEUES": queues_for(pools)}
    scratch = tempfile.TemporaryDirectory(prefix="sluice-soak-")
    env = {name: json.dumps(value) for name, value in conf.items()}
    env["DATABASE_URL"] = fresh_database(scratch.name)
    users = {pk: get_user_model()(pk=pk) for pk in range(1, PARTICIPANTS + 1)}
    outcomes = Counter()
    stdout.write(
        f"soak: {minutes:g} min at {rate:.0f} events/s ({rate_multiplier:g} x the routine + background pools), "
        f"pools {pools}, {SEND_LATENCY_MS} ms a send, flush every {FLUSH_INTERVAL_S} s"
    )
    with override_settings(**conf):
        workers = [WorkerProcess(k, redis_url, extra=["--concurrency", str(n)], env=env) for k, n in pools.items()]
        for worker in workers:
            worker.start()
        sampler = Sampler(client, workers)
        try:
            sampler.start()
            started = time.time()
            next_flush, next_report = started + FLUSH_INTERVAL_S, started + 30
            for i, (klass, kind, user, entity) in enumerate(events()):
                due = started + i / rate
                if due >= started + duration:
                    break
                if (delay := due - time.time()) > 0:
                    time.sleep(delay)
                try:
                    outcome = notify(users[user], kind, entity_id=entity, payload={"t0": time.time(), "title": entity})
                    outcomes[klass, str(outcome)] += 1
                except Rejected:
                    outcomes[klass, "rejected"] += 1
                now = time.time()
                if now >= next_flush:
                    flush.apply_async(kwargs={"trigger": "beat"})  # what django-celery-beat sends
                    next_flush += FLUSH_INTERVAL_S
                if now >= next_report:
                    point = sampler.points[-1] if sampler.points else {}
                    stdout.write(
                        f"  {now - started:5.0f} s: {sum(outcomes.values())} events, Redis "
                        f"{point.get('used_memory', 0) / MB:.1f} MB, depths "
                        + ", ".join(f"{k} {point.get(k, 0)}" for k in CLASSES)
                    )
                    next_report += 30
            ended = time.time()
            breakdown = memory_breakdown(client)
            stdout.write(f"  load stopped after {ended - started:.0f} s; draining")
            deadline = ended + max_drain_s
            while not drained(client, "sluice") and time.time() < deadline:
                if time.time() >= next_flush:
                    flush.apply_async(kwargs={"trigger": "beat"})
                    next_flush += FLUSH_INTERVAL_S
                time.sleep(0.5)
            time.sleep(SEND_LATENCY_MS / 1000 * 3)  # the last sends finish
            drain_s = time.time() - ended
            is_drained = drained(client, "sluice")
        finally:
            sampler.stop.set()
            sampler.join()
            for worker in workers:
                worker.stop()
            scratch.cleanup()
    sampler.take_records()
    marks, bytes_per_mark = mark_bytes(client)
    result = summarize(sampler, outcomes, started, ended, marks, bytes_per_mark)
    critical_rate = rate * next(share for klass, _, share in MIX if klass == "critical")
    result.update(
        minutes=minutes,
        rate_multiplier=rate_multiplier,
        offered_per_s={"target": round(rate, 1), "achieved": round(sum(outcomes.values()) / (ended - started), 1)},
        pools=pools,
        capacity_per_s={k: round(pool_rate(n), 1) for k, n in pools.items()},
        critical_utilisation=round(critical_rate / pool_rate(pools["critical"]), 2),
        queue_capacity={k: v["capacity"] for k, v in conf["SLUICE_QUEUES"].items()},
        drain_s=round(drain_s, 1),
        drained=is_drained,
        redis_used_memory_peak_bytes=client.info("memory")["used_memory_peak"],
        redis_at_end_of_load=breakdown,
    )
    for line in report_lines(result):
        stdout.write(line)
    return result


def summarize(sampler, outcomes, started, ended, marks, bytes_per_mark):
    """Memory and RSS first minute vs last minute, critical latency, and the books."""
    window = min(60.0, (ended - started) / 3)
    loaded = [p for p in sampler.points if started <= p["t"] <= ended]
    first = [p for p in loaded if p["t"] <= started + window]
    # The first minute fills the queues and the fold key space; flatness is judged from the next one on.
    settled = [p for p in loaded if started + window < p["t"] <= started + 2 * window]
    last = [p for p in loaded if p["t"] >= ended - window]

    def redis_part(points, key):
        return mean(key(p) for p in points)

    # Every send leaves a dedup mark for pipeline.broker.marks.lifetime_s(): Redis grows with the sends until the first
    # marks expire.
    def without_marks(p):
        return p["used_memory"] - min(p["sends"], marks) * bytes_per_mark

    redis = {
        "first_minute_mb": round(redis_part(first, lambda p: p["used_memory"]) / MB, 2),
        "last_minute_mb": round(redis_part(last, lambda p: p["used_memory"]) / MB, 2),
        "peak_mb": round(max(p["used_memory"] for p in loaded) / MB, 2),
        "sent_marks": marks,
        "bytes_per_mark": round(bytes_per_mark),
        "excluding_marks_first_minute_mb": round(redis_part(first, without_marks) / MB, 2),
        "excluding_marks_last_minute_mb": round(redis_part(last, without_marks) / MB, 2),
    }
    minutes = [
        [p for p in loaded if started + 60 * m <= p["t"] < started + 60 * (m + 1)]
        for m in range(max(1, round((ended - started) / 60)))
    ]
    redis["per_minute_mb"] = [round(redis_part(m, lambda p: p["used_memory"]) / MB, 2) for m in minutes if m]
    redis["excluding_marks_per_minute_mb"] = [round(redis_part(m, without_marks) / MB, 2) for m in minutes if m]
    redis["growth_pct"] = growth(redis["first_minute_mb"], redis["last_minute_mb"])
    redis["excluding_marks_growth_pct"] = growth(
        redis["excluding_marks_first_minute_mb"], redis["excluding_marks_last_minute_mb"]
    )
    after_warmup = redis_part(settled, without_marks)
    redis["excluding_marks_after_warmup_growth_pct"] = (
        growth(after_warmup, redis_part(last, without_marks)) if after_warmup else None
    )
    processes = []
    for name in sorted({n for p in loaded for n in p["rss"]}):
        a = mean(p["rss"][name] for p in first if name in p["rss"])
        b = mean(p["rss"][name] for p in last if name in p["rss"])
        peak = max(p["rss"][name] for p in loaded if name in p["rss"])
        cpu = [(p["t"], p["cpu"][name]) for p in loaded if name in p["cpu"]]
        busy = (cpu[-1][1] - cpu[0][1]) / (cpu[-1][0] - cpu[0][0]) if len(cpu) > 1 else None
        klass, role, pid = name.split("|")
        processes.append(
            {
                "process": f"{klass} {role}".strip(),
                "pid": int(pid),
                "first_minute_mb": round(a / MB, 1) if a else None,
                "last_minute_mb": round(b / MB, 1) if b else None,
                "peak_mb": round(peak / MB, 1),
                "growth_pct": growth(a, b) if a and b else None,
                "cpu_pct": round(100 * busy, 1) if busy is not None else None,
            }
        )
    by_id = {}
    for notification_id, klass, count, latency, at in sampler.sends:
        by_id.setdefault(notification_id, (klass, count, latency, at))
    critical = [(lat, at) for klass, _, lat, at in by_id.values() if klass == "critical" and lat is not None]
    latencies = [lat for lat, _ in critical]
    per_minute = []
    for m in range(max(1, round((ended - started) / 60))):
        mine = [lat for lat, at in critical if started + 60 * m <= at < started + 60 * (m + 1)]
        per_minute.append(round(percentile(mine, 99), 1) if mine else None)
    books, lost = {}, 0
    for klass in CLASSES:
        singles = sum(1 for i, (k, *_) in by_id.items() if k == klass and not i.startswith("digest-"))
        in_digests = sum(c for i, (k, c, *_) in by_id.items() if k == klass and i.startswith("digest-"))
        total = sum(v for (k, _), v in outcomes.items() if k == klass)
        missing = total - singles - in_digests - outcomes[klass, "rejected"]
        lost += missing
        books[klass] = {
            "events": total,
            **{o: n for (k, o), n in sorted(outcomes.items()) if k == klass},
            "sent_single": singles,
            "sent_digests": sum(1 for i, (k, *_) in by_id.items() if k == klass and i.startswith("digest-")),
            "events_in_digests": in_digests,
            "lost": missing,
        }
    p99 = round(percentile(latencies, 99), 1) if latencies else None
    workers = [p for p in processes if p["process"].split()[0] in CLASSES]
    rss_growths = [p["growth_pct"] for p in workers if p["growth_pct"] is not None]
    return {
        "redis": redis,
        "rss": processes,
        "critical": {
            "p50_ms": round(percentile(latencies, 50), 1) if latencies else None,
            "p99_ms": p99,
            "max_ms": round(max(latencies), 1) if latencies else None,
            "p99_per_minute_ms": per_minute,
            "target_p99_ms": CRITICAL_P99_TARGET_MS,
            "sent": len(latencies),
        },
        "books": books,
        "lost": lost,
        "sends_recorded": len(sampler.sends),
        "series": [
            {
                "t": round(p["t"] - started, 1),
                "redis_mb": round(p["used_memory"] / MB, 2),
                "sends": p["sends"],
                "workers_rss_mb": round(sum(v for k, v in p["rss"].items() if k.split("|")[0] in CLASSES) / MB, 1),
                **{k: p.get(k, 0) for k in CLASSES},
            }
            for p in sampler.points
        ],
        "distinct_ids": len(by_id),
        "targets": [
            {
                "target": f"Redis memory without the send marks flat after the first minute: <= {FLAT_PCT}%",
                "measured": redis["excluding_marks_after_warmup_growth_pct"],
                "holds": (redis["excluding_marks_after_warmup_growth_pct"] or 0) <= FLAT_PCT,
            },
            {
                "target": f"RSS of every worker process flat, first to last minute: <= {FLAT_PCT}%",
                "measured": max(rss_growths, default=None),
                "holds": all(g <= FLAT_PCT for g in rss_growths),
            },
            {
                "target": f"critical p99 <= {CRITICAL_P99_TARGET_MS} ms",
                "measured": p99,
                "holds": p99 is not None and p99 <= CRITICAL_P99_TARGET_MS,
            },
            {"target": "lost = 0", "measured": lost, "holds": lost == 0},
        ],
    }


def report_lines(result):
    """The human summary: targets first, then the figures behind them."""
    redis, critical = result["redis"], result["critical"]
    lines = [
        f"offered {result['offered_per_s']['achieved']} events/s for {result['minutes']:g} min; "
        f"drained in {result['drain_s']} s",
        f"Redis: first minute {redis['first_minute_mb']} MB, last minute {redis['last_minute_mb']} MB "
        f"({redis['growth_pct']}%), peak {redis['peak_mb']} MB; {redis['sent_marks']} send marks x "
        f"{redis['bytes_per_mark']} B; without them {redis['excluding_marks_first_minute_mb']} -> "
        f"{redis['excluding_marks_last_minute_mb']} MB ({redis['excluding_marks_growth_pct']}%); per minute "
        f"{redis['per_minute_mb']} MB, without marks {redis['excluding_marks_per_minute_mb']} MB",
        f"critical: p50 {critical['p50_ms']} ms, p99 {critical['p99_ms']} ms (target {critical['target_p99_ms']}), "
        f"max {critical['max_ms']} ms; p99 per minute {critical['p99_per_minute_ms']}",
    ]
    for p in result["rss"]:
        lines.append(
            f"  RSS {p['process']:<22} {p['first_minute_mb']} -> {p['last_minute_mb']} MB "
            f"({p['growth_pct']}%), peak {p['peak_mb']} MB, CPU {p['cpu_pct']}%"
        )
    lines.append(f"books: {json.dumps(result['books'])}")
    lines += [f"  {'ok  ' if t['holds'] else 'MISS'} {t['target']}: {t['measured']}" for t in result["targets"]]
    return lines
