"""Each queue's capacity and current depth: the one API the exporter, the admin and the benchmarks use."""

from . import keys
from .conf import CLASSES, sluice_settings
from .store import get_redis


def snapshot(client=None):
    """{class: {"queue", "capacity", "ceiling", "depth"}}, the depths read in one round trip.

    Depth counts every admitted message that no worker has started: the list and its priority
    sub-lists (workers run with prefetch disabled, so none hides in a worker's buffer).
    """
    client = client or get_redis()
    queues = sluice_settings().queues
    pipe = client.pipeline(transaction=False)
    for klass in CLASSES:
        for name in keys.priority_lists(queues[klass].name):
            pipe.llen(name)
    lengths = iter(pipe.execute())
    result = {}
    for klass in CLASSES:
        queue = queues[klass]
        depth = sum(next(lengths) for _ in keys.priority_lists(queue.name))
        result[klass] = {"queue": queue.name, "capacity": queue.capacity, "ceiling": queue.ceiling, "depth": depth}
    return result


def depth(klass, client=None):
    """The current depth of one class's queue."""
    return snapshot(client)[klass]["depth"]


def drain_rate(queue_name, client=None):
    """Messages per second the queue drained over the exporter's window, or None before it measured any."""
    raw = (client or get_redis()).get(keys.drain_rate(queue_name))
    return float(raw) if raw else None
