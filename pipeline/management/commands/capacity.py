"""manage.py capacity: per queue λ, μ, n, ρ, workers needed, drain time, backlog debt, and a verdict."""

import json
import math

from django.core.management.base import BaseCommand, CommandError

from pipeline.broker.depth import snapshot
from pipeline.conf import CLASSES, sluice_settings
from pipeline.connections import partition_clients
from pipeline.observe.capacity_model import assess, rates_from_samples
from pipeline.observe.window import points

UNITS = {"s": 1, "m": 60, "h": 3600}


def duration(text):
    """'90s', '15m', '1h' or plain seconds."""
    try:
        return float(text[:-1]) * UNITS[text[-1]] if text[-1] in UNITS else float(text)
    except (ValueError, IndexError):
        raise CommandError(f"--window takes a duration like 90s, 15m or 1h, got {text!r}") from None


class Command(BaseCommand):
    help = "Capacity per queue from the exporter's samples (Little's law): is each pool keeping up?"

    def add_arguments(self, parser):
        parser.add_argument("--window", default="1h", type=duration)
        parser.add_argument("--target-rho", type=float, default=0.7)
        parser.add_argument(
            "--workers",
            action="append",
            default=[],
            metavar="CLASS=N",
            help="worker slots per class; by default asked of the running workers",
        )
        parser.add_argument("--json", action="store_true", help="print JSON")

    def handle(self, window, target_rho, workers, json, **options):
        counts = self._workers(workers)
        conf = sluice_settings()
        depths = snapshot()
        results = []
        for klass in CLASSES:
            queue = conf.queues[klass].name
            arrival, mu = class_rates(queue, window)
            results.append(
                assess(
                    queue,
                    arrival,
                    mu,
                    counts.get(klass, 0),
                    depths[klass]["depth"],
                    window,
                    target_rho,
                    channel_limit(klass),
                ).as_dict()
            )
        if json:
            self.stdout.write(_dumps(results))
            return
        for r in results:
            fmt = lambda v: "-" if v is None else f"{v:.2f}" if isinstance(v, float) else str(v)  # noqa: E731
            self.stdout.write(
                f"{r['queue']:<11} λ {fmt(r['arrival_per_s'])}/s  μ {fmt(r['mu_per_worker'])}/s/worker  "
                f"n {r['workers']}  ρ {fmt(r['rho'])}  n_min {fmt(r['n_min'])}  n_safe {fmt(r['n_safe'])}  "
                f"drain {fmt(r['drain_time_s'])} s  debt {r['backlog_debt']:,.0f} msgs  → {r['verdict']}"
            )

    def _workers(self, given):
        counts = {}
        for item in given:
            klass, _, n = item.partition("=")
            if klass not in CLASSES or not n.isdigit():
                raise CommandError(f"--workers takes CLASS=N with CLASS in {list(CLASSES)}, got {item!r}")
            counts[klass] = int(n)
        missing = [k for k in CLASSES if k not in counts]
        if missing:
            counts.update({k: v for k, v in running_workers().items() if k in missing})
        return counts


def class_rates(queue, window):
    """λ and μ of a class's queue over ``window`` seconds; for a class on a Redis Cluster, λ summed over its
    partitions and μ from their summed sends and send time."""
    parts = partition_clients(queue)
    if not parts:
        return rates_from_samples(points(queue, window))
    arrival, done, busy = 0.0, 0.0, 0.0
    for _index, client in parts:
        samples = points(queue, window, client=client)
        if len(samples) < 2:
            continue
        first, last = samples[0], samples[-1]
        part_arrival, _mu = rates_from_samples(samples)
        arrival += part_arrival
        done += last["done"] - first["done"]
        busy += last.get("send_s", 0) - first.get("send_s", 0)
    return arrival, (done / busy if busy > 0 and done > 0 else None)


def running_workers(timeout=1.0):
    """Worker slots consuming each class's queue (a worker consumes every partition of a class on a Redis Cluster:
    its slots count once), asked of the live workers over the broker."""
    from pipeline.celery import app

    queues = {name: k for k, q in sluice_settings().queues.items() for name in q.queue_names[:1]}
    inspect = app.control.inspect(timeout=timeout)
    active, stats = inspect.active_queues() or {}, inspect.stats() or {}
    counts = {}
    for node, consumed in active.items():
        slots = (stats.get(node, {}).get("pool") or {}).get("max-concurrency", 1)
        for queue in consumed:
            if queue["name"] in queues:
                counts[queues[queue["name"]]] = counts.get(queues[queue["name"]], 0) + slots
    return counts


def channel_limit(klass):
    """The tightest rate limit among the channels the class's kinds send through, or None."""
    conf = sluice_settings()
    limits = [
        conf.channels[c].gate.rate_per_s
        for kind in conf.kinds.values()
        if kind.klass == klass
        for c in kind.channels
        if conf.channels[c].gate and conf.channels[c].gate.rate_per_s
    ]
    return min(limits) if limits else None


def _dumps(results):
    clean = [{k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in r.items()} for r in results]
    return json.dumps(clean, indent=2)
