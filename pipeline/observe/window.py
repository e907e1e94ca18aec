"""Windowed signals: samples of latency, depth and work done, kept in Redis so every exporter agrees."""

import json
import time
from dataclasses import dataclass

from pipeline.broker.depth import queue_redis, snapshot
from pipeline.conf import CLASSES, sluice_settings
from pipeline.connections import classes_by_redis, partition_clients
from pipeline.metrics import digest_published_field, notifications_field, processed_field, read_counters
from pipeline.observe.latency import oldest_ages
from pipeline.redis import keys


def samples_key(queue):
    return f"{keys.PREFIX}:samples:{queue}"


@dataclass(frozen=True)
class Window:
    """A queue's signals over the window: latency avg and max, throughput, drain time."""

    latency_avg_s: float
    latency_max_s: float
    throughput_per_s: float | None
    drain_time_s: float
    # Little's law: arrivals per second x seconds of sending per message = worker slots the arriving
    # work keeps busy. Unlike latency, it says how many slots are enough, so it can hold a floor.
    busy_slots: float = 0.0
    # Seconds of sending per message over the window (0 when nothing was sent): what turns a rate into slots.
    send_seconds_per_message: float = 0.0


# Samples are kept an hour at least, for `manage.py capacity --window 1h`.
RETAIN_S = 3600


def arrived(counters, klass):
    """Messages admitted to the class queue so far: accepted events and published digest messages."""
    return counters.get(notifications_field(klass, "accepted"), 0) + counters.get(digest_published_field(klass), 0)


def send_seconds(counters, klass):
    """Total time the class's sends took so far, over every channel."""
    return sum(v for k, v in counters.items() if k.startswith("send_duration:") and k.endswith(f":{klass}:sum"))


def sample(window_s, now=None, client=None, retain_s=None):
    """Take one sample per queue (now), store it, and drop samples older than the retention.

    The retention is the longest of ``window_s``, ``retain_s`` (the exporter's floor window) and RETAIN_S.
    """
    now = now or time.time()
    queues, ages = {}, {}
    # Each class's samples are kept on its own Redis, from that Redis's queue and counters.
    for redis_client, classes in classes_by_redis(client):
        on_it = _sample_on(redis_client, classes, window_s, now, retain_s)
        queues.update(on_it[0])
        ages.update(on_it[1])
    return {klass: queues[klass] for klass in CLASSES}, ages


def _sample_on(client, classes, window_s, now, retain_s):
    queues = {klass: queue for klass, queue in snapshot(client).items() if klass in classes}
    ages = oldest_ages(client, [q["queue"] for q in queues.values()], now)
    done = read_counters(client)
    pipe = client.pipeline(transaction=False)
    for klass, queue in queues.items():
        name = queue["queue"]
        point = {
            "t": now,
            "latency": ages[name],
            "depth": queue["depth"],
            "done": done.get(processed_field(klass), 0),
            "arrived": arrived(done, klass),
            "send_s": send_seconds(done, klass),
        }
        retain = max(window_s, retain_s or 0, RETAIN_S)
        pipe.zadd(samples_key(name), {json.dumps(point): now})
        pipe.zremrangebyscore(samples_key(name), "-inf", now - retain)
        pipe.expire(samples_key(name), int(retain) + 60)
    pipe.execute()
    for queue in queues.values():
        stats = window(queue["queue"], window_s, now, client)
        if stats.throughput_per_s:
            # Admission reads it to tell a rejected caller when to come back (Rejected.retry_after).
            client.set(keys.drain_rate(queue["queue"]), stats.throughput_per_s, ex=int(window_s * 2))
    return queues, ages


def points(queue, window_s, now=None, client=None):
    """The samples of the last ``window_s`` seconds, oldest first."""
    now = now or time.time()
    raw = (client or queue_redis(queue)).zrangebyscore(samples_key(queue), now - window_s, "+inf")
    return [json.loads(point) for point in raw]


def window(queue, window_s, now=None, client=None):
    """The queue's Window from the samples of the last ``window_s`` seconds; for a class on a Redis Cluster, its
    partitions' combined (combine())."""
    parts = partition_clients(queue) if client is None else []
    if parts:
        return combine([summarize(points(queue, window_s, now, each)) for _index, each in parts])
    return summarize(points(queue, window_s, now, client))


def combine(windows):
    """One Window for a class from its partitions': the worst latency and drain time (a hot partition is what the
    class waits on), the throughput and busy slots summed."""
    rates = [w.throughput_per_s for w in windows if w.throughput_per_s is not None]
    return Window(
        max(w.latency_avg_s for w in windows),
        max(w.latency_max_s for w in windows),
        sum(rates) if rates else None,
        max(w.drain_time_s for w in windows),
        sum(w.busy_slots for w in windows),
        max(w.send_seconds_per_message for w in windows),
    )


def queue_age(queue, now):
    """Age of the oldest due message of ``queue`` (across its partitions on a Redis Cluster), and {partition index:
    age} of each partition ({} on one Redis)."""
    parts = partition_clients(queue)
    if not parts:
        return oldest_ages(queue_redis(queue), [queue], now)[queue], {}
    each = {index: oldest_ages(client, [queue], now)[queue] for index, client in parts}
    return max(each.values()), each


def summarize(samples):
    """Latency avg and max, throughput and drain time from samples, oldest first."""
    if not samples:
        return Window(0.0, 0.0, None, 0.0)
    latencies = [p["latency"] for p in samples]
    first, last = samples[0], samples[-1]
    span = last["t"] - first["t"]
    throughput = (last["done"] - first["done"]) / span if span > 0 else None
    depth = last["depth"]
    if depth == 0:
        drain = 0.0
    elif throughput:
        drain = depth / throughput
    else:
        drain = float("inf")
    done = last["done"] - first["done"]
    arrival = (last.get("arrived", 0) - first.get("arrived", 0)) / span if span > 0 else 0.0
    per_message = (last.get("send_s", 0) - first.get("send_s", 0)) / done if done > 0 else 0.0
    return Window(
        sum(latencies) / len(latencies), max(latencies), throughput, drain, arrival * per_message, per_message
    )


def class_of(queue):
    """The class whose queue is called ``queue``, or None."""
    queues = sluice_settings().queues
    return next((k for k in CLASSES if queues[k].name == queue), None)
