"""The exporter: Prometheus text on /metrics, and KEDA metrics-api JSON on /scaler/<queue>."""

import json
import logging
import math
import threading
import time
from socketserver import ThreadingMixIn
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from redis.exceptions import RedisError

from pipeline.admission.fold_fields import SIZE
from pipeline.broker import deadletters
from pipeline.broker.depth import snapshot
from pipeline.conf import CLASSES, sluice_settings
from pipeline.connections import fold_store_classes, get_redis, shared_redis
from pipeline.durability import STEPS
from pipeline.metrics import (
    BEAT_FLUSH_INTERVAL_FIELD,
    BUCKETS,
    DEAD_LETTER_REASONS,
    DEAD_LETTERS_DROPPED,
    DEAD_LETTERS_REPLAYED,
    DIGEST_EVENTS,
    DIGEST_FLUSH_INTERVAL,
    DIGEST_LAST_FLUSH,
    DIGEST_MESSAGES,
    FLUSH_TRIGGERS,
    FOLD_GRAINS,
    FOLD_REASONS,
    OUTCOMES,
    dead_letter_field,
    digest_events_field,
    digest_messages_field,
    durability_field,
    fold_field,
    fold_grain_field,
    idempotent_replay_field,
    last_flush_field,
    notifications_field,
    read_counters,
)
from pipeline.observe import (
    activity_metrics,
    fanout_metrics,
    housekeeping_metrics,
    inbox_metrics,
    provider_metrics,
    schedule_metrics,
)
from pipeline.observe.scaler import BadQuery, scaler_payload
from pipeline.observe.window import queue_age, sample, window
from pipeline.redis import keys

logger = logging.getLogger("sluice.exporter")


class SluiceCollector:
    """Reads everything from Redis at scrape time, in a few round trips, so any replica reports the same.

    Latency is windowed over ``window_s``; busy slots over ``floor_window_s`` (the latency window
    when None), long enough that a spike of a minute barely moves the capacity floor.
    """

    def __init__(self, window_s, floor_window_s=None):
        self.window_s = window_s
        self.floor_window_s = floor_window_s or window_s

    def collect(self):
        # Every Redis Sluice uses: each queue's on its class's Redis, the counters summed over all of them.
        now = time.time()
        queues = snapshot()
        ages, partition_ages = {}, {}
        for q in queues.values():
            ages[q["queue"]], partition_ages[q["queue"]] = queue_age(q["queue"], now)
        counters = read_counters()
        stores = [get_redis(url) for url in fold_store_classes()]
        depth = GaugeMetricFamily(
            "sluice_queue_depth", "Messages admitted that no worker has started", labels=["queue"]
        )
        capacity = GaugeMetricFamily("sluice_queue_capacity", "Admission bound of the queue", labels=["queue"])
        latency = GaugeMetricFamily(
            "sluice_queue_latency_seconds",
            "Age of the oldest waiting message (from published_at, or a past ETA)",
            labels=["queue"],
        )
        windowed = GaugeMetricFamily(
            "sluice_queue_latency_window_seconds",
            f"Queue latency over the last {self.window_s:g} s",
            labels=["queue", "stat"],
        )
        drain = GaugeMetricFamily(
            "sluice_drain_time_seconds", "Depth divided by the throughput over the window", labels=["queue"]
        )
        busy = GaugeMetricFamily(
            "sluice_busy_slots",
            f"Worker slots the arriving work keeps busy over the last {self.floor_window_s:g} s (arrivals x send time)",
            labels=["queue"],
        )
        for queue in queues.values():
            name = queue["queue"]
            stats = window(name, self.window_s, now)
            floor = stats if self.floor_window_s == self.window_s else window(name, self.floor_window_s, now)
            depth.add_metric([name], queue["depth"])
            capacity.add_metric([name], queue["capacity"])
            latency.add_metric([name], ages[name])
            windowed.add_metric([name, "avg"], stats.latency_avg_s)
            windowed.add_metric([name, "max"], stats.latency_max_s)
            drain.add_metric([name], stats.drain_time_s)
            busy.add_metric([name], floor.busy_slots)
        yield from (depth, capacity, latency, windowed, drain, busy)
        yield from _partition_gauges(queues, partition_ages)
        yield from self._counters(counters)
        pending = GaugeMetricFamily("sluice_digest_pending_keys", "Fold keys waiting for a flush")
        pending.add_metric([], sum(store.zcard(keys.pending()) for store in stores))
        yield pending
        held = GaugeMetricFamily(
            "sluice_digest_held_keys", "Fold keys held for later (quiet hours, a cadence): not due before a flush"
        )
        held.add_metric([], sum(store.zcount(keys.pending(), f"({now}", "+inf") for store in stores))
        yield held
        yield from _store_size(stores)
        yield from _flush_gauges(stores)
        kept = GaugeMetricFamily("sluice_dead_letters", "Dead letters kept (bounded by SLUICE_DEAD_LETTERS_MAX)")
        kept.add_metric([], deadletters.size())
        yield kept
        yield from provider_metrics.collect(shared_redis(), counters)
        yield from inbox_metrics.collect(counters)
        yield from inbox_metrics.due(now)
        yield from housekeeping_metrics.collect(counters, now)
        yield from schedule_metrics.collect(counters, now)
        yield from activity_metrics.collect(counters)
        yield from fanout_metrics.collect(counters)

    def _counters(self, counters):
        notifications = CounterMetricFamily(
            "sluice_notifications", "Events by class and what admission did", labels=["class", "outcome"]
        )
        for klass in CLASSES:
            for outcome in OUTCOMES:
                notifications.add_metric([klass, outcome], counters.get(notifications_field(klass, outcome), 0))
        yield notifications
        replays = CounterMetricFamily(
            "sluice_idempotent_replays",
            "Calls that repeated a recorded idempotency key: answered with the first call's outcome, nothing published",
            labels=["class"],
        )
        for klass in CLASSES:
            replays.add_metric([klass], counters.get(idempotent_replay_field(klass), 0))
        yield replays
        sent = CounterMetricFamily(
            "sluice_sent", "Sends by channel, class and status", labels=["channel", "class", "status"]
        )
        histograms = {}
        for field, value in sorted(counters.items()):
            parts = field.split(":")
            if parts[0] == "sent" and len(parts) == 4:
                sent.add_metric(parts[1:], value)
            elif parts[0] == "send_duration" and len(parts) >= 4:
                entry = histograms.setdefault((parts[1], parts[2]), {"buckets": {}, "sum": 0.0})
                if parts[3] == "le":
                    entry["buckets"][float(parts[4])] = value
                elif parts[3] == "sum":
                    entry["sum"] = value
        yield sent
        duration = HistogramMetricFamily(
            "sluice_send_duration_seconds", "Time a channel backend took to send", labels=["channel", "class"]
        )
        for labels, entry in histograms.items():
            running, buckets = 0, []
            for le in BUCKETS:
                running += entry["buckets"].get(le, 0)
                buckets.append(("+Inf" if math.isinf(le) else repr(le), running))
            duration.add_metric(list(labels), buckets, entry["sum"])
        yield duration
        flushes = CounterMetricFamily("sluice_digest_flushes", "Digest flushes run")
        flushes.add_metric([], counters.get("digest:flushes", 0))
        yield flushes
        yield from _dead_letter_counters(counters)
        yield from _fold_counters(counters)
        yield _unconfirmed(counters)
        yield from _digest_counters(counters)


def _partition_gauges(queues, partition_ages):
    """Depth and latency of each partition of a class on a Redis Cluster: a hot partition fills before its class."""
    depth = GaugeMetricFamily(
        "sluice_partition_depth",
        "Messages waiting in one partition of a class on a Redis Cluster",
        labels=["queue", "partition"],
    )
    latency = GaugeMetricFamily(
        "sluice_partition_latency_seconds",
        "Age of the oldest waiting message in one partition of a class on a Redis Cluster",
        labels=["queue", "partition"],
    )
    for queue in queues.values():
        for index, found in enumerate(queue.get("partitions", ())):
            depth.add_metric([queue["queue"], str(index)], found)
        for index, age in partition_ages[queue["queue"]].items():
            latency.add_metric([queue["queue"], str(index)], age)
    yield from (depth, latency)


def _store_size(stores):
    # Each folding Redis keeps its own store, each with the whole bound: the fullest is the one that refuses first.
    sizes = [store.hmget(keys.fold_store_size(), SIZE["keys"], SIZE["bytes"]) for store in stores]
    stored_keys = max(int(k or 0) for k, _b in sizes)
    stored_bytes = max(int(b or 0) for _k, b in sizes)
    bounds = sluice_settings().digest
    for unit, value, bound in (
        ("keys", stored_keys, bounds.max_fold_keys),
        ("bytes", stored_bytes, bounds.max_fold_bytes),
    ):
        size = GaugeMetricFamily(f"sluice_digest_store_{unit}", f"The fold store's size, in {unit}")
        size.add_metric([], int(value or 0))
        limit = GaugeMetricFamily(f"sluice_digest_store_max_{unit}", f"The fold store's bound, in {unit}")
        limit.add_metric([], bound)
        yield size
        yield limit


def _digest_counters(counters):
    messages = CounterMetricFamily(DIGEST_MESSAGES, "Digest messages a flush published", labels=["class"])
    events = CounterMetricFamily(DIGEST_EVENTS, "Folded events inside the published digests", labels=["class"])
    for klass in ("routine", "background"):
        messages.add_metric([klass], counters.get(digest_messages_field(klass), 0))
        events.add_metric([klass], counters.get(digest_events_field(klass), 0))
    yield messages
    yield events


def _fold_counters(counters):
    folds = CounterMetricFamily(
        "sluice_folds",
        "Events folded into the digest, by why (queue full, a preference, quiet hours, a cadence, "
        "a throttle; refused when the store was full)",
        labels=["class", "reason"],
    )
    grains = CounterMetricFamily(
        "sluice_fold_grains", "Events folded, by the grain of the key that took them", labels=["class", "grain"]
    )
    for klass in ("routine", "background"):
        for reason in FOLD_REASONS:
            folds.add_metric([klass, reason], counters.get(fold_field(klass, reason), 0))
        for grain in FOLD_GRAINS:
            grains.add_metric([klass, grain], counters.get(fold_grain_field(klass, grain), 0))
    yield folds
    yield grains


def _unconfirmed(counters):
    unconfirmed = CounterMetricFamily(
        "sluice_durability_unconfirmed",
        "Writes of a replicated class that its replicas did not confirm in time (WAIT), by step",
        labels=["class", "step"],
    )
    for klass in CLASSES:
        for step in STEPS:
            unconfirmed.add_metric([klass, step], counters.get(durability_field(klass, step), 0))
    return unconfirmed


def _flush_gauges(stores):
    every = [store.hgetall(keys.digest_stats()) for store in stores]
    last = GaugeMetricFamily(
        DIGEST_LAST_FLUSH, "When a digest flush last ran, by what started it (Unix time)", labels=["trigger"]
    )
    for trigger in FLUSH_TRIGGERS:
        found = [stats.get(last_flush_field(trigger).encode()) for stats in every]
        if all(at is not None for at in found):
            # The store flushed longest ago: a flush stalled on any one Redis is a flush stalled.
            last.add_metric([trigger], min(float(at) for at in found))
    yield last
    interval = GaugeMetricFamily(DIGEST_FLUSH_INTERVAL, "The interval Sluice's beat runs the digest flush at")
    running = [float(at) for stats in every if (at := stats.get(BEAT_FLUSH_INTERVAL_FIELD.encode())) is not None]
    if running:
        # What beat runs, not what the settings say: a schedule out of step with them is sluice.E006.
        interval.add_metric([], max(running))
    yield interval


def _dead_letter_counters(counters):
    letters = CounterMetricFamily(
        "sluice_dead_letters", "Messages dead-lettered, by class and reason", labels=["class", "reason"]
    )
    for klass in CLASSES:
        for reason in DEAD_LETTER_REASONS:
            letters.add_metric([klass, reason], counters.get(dead_letter_field(klass, reason), 0))
    yield letters
    dropped = CounterMetricFamily(
        "sluice_dead_letters_dropped", "Dead letters dropped, oldest first, because the list was full"
    )
    dropped.add_metric([], counters.get(DEAD_LETTERS_DROPPED, 0))
    yield dropped
    replayed = CounterMetricFamily("sluice_dead_letters_replayed", "Dead letters put back on their queue")
    replayed.add_metric([], counters.get(DEAD_LETTERS_REPLAYED, 0))
    yield replayed


def application(window_s, floor_window_s=None):
    """The exporter's WSGI app: /metrics, /scaler/<queue>[?within=&span=] (pipeline.observe.scaler), and /healthz."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SluiceCollector(window_s, floor_window_s))
    metrics_app = make_wsgi_app(registry)

    def app(environ, start_response):
        path = environ.get("PATH_INFO", "")
        try:
            if path == "/metrics":
                return metrics_app(environ, start_response)
            if path.startswith("/scaler/"):
                query = environ.get("QUERY_STRING", "")
                try:
                    payload = scaler_payload(path.removeprefix("/scaler/"), window_s, floor_window_s, query)
                except BadQuery as exc:
                    return _json(start_response, "400 Bad Request", {"error": str(exc)})
                if payload is None:
                    return _json(start_response, "404 Not Found", {"error": "unknown queue"})
                return _json(start_response, "200 OK", payload)
            if path == "/healthz":
                return _json(start_response, "200 OK", {"status": "ok"})
            return _json(start_response, "404 Not Found", {"error": "not found"})
        except RedisError as exc:
            logger.warning("Redis unavailable: %s", type(exc).__name__)
            return _json(start_response, "503 Service Unavailable", {"error": "redis unavailable"})

    return app


def _json(start_response, status, body):
    data = json.dumps(body).encode()
    start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(data)))])
    return [data]


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, *args):
        pass


def sampler(window_s, every_s, stop, retain_s=None):
    """Sample the queues every ``every_s`` seconds until ``stop`` is set; Redis errors are logged and survived."""
    while not stop.is_set():
        try:
            sample(window_s, retain_s=retain_s)
        except RedisError as exc:
            logger.warning("sampling failed, Redis unavailable: %s", type(exc).__name__)
        stop.wait(every_s)


def serve(host, port, window_s, every_s, floor_window_s=None, on_listening=None):
    """Run the sampler in a thread and serve HTTP until interrupted; ``on_listening()`` is called once the socket
    takes connections, so whoever waits for the exporter's ready line can scrape it at once."""
    stop = threading.Event()
    # Samples are kept for the longer of the two windows (and at least window.RETAIN_S).
    retain_s = max(window_s, floor_window_s or window_s)
    thread = threading.Thread(target=sampler, args=(window_s, every_s, stop, retain_s), daemon=True)
    thread.start()
    app = application(window_s, floor_window_s)
    server = make_server(host, port, app, server_class=_Server, handler_class=_QuietHandler)
    if on_listening is not None:
        on_listening()
    try:
        server.serve_forever()
    finally:
        stop.set()
        server.server_close()
