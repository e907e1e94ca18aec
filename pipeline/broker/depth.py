"""Each queue's capacity and current depth: the one API the exporter, the admin and the benchmarks use."""

from pipeline.conf import CLASSES, queue_lists, sluice_settings
from pipeline.connections import class_redis, classes_by_redis
from pipeline.redis import keys


def snapshot(client=None):
    """{class: {"queue", "capacity", "ceiling", "depth"}}, the depths read in one round trip.

    Depth counts every admitted message that no worker has started: the list and its priority
    sub-lists (workers run with prefetch disabled, so none hides in a worker's buffer).
    """
    queues = sluice_settings().queues
    depths = {}
    # One round trip per Redis: each class's queue lives on its class's Redis (``client``: all on that one).
    for redis_client, classes in classes_by_redis(client):
        pipe = redis_client.pipeline(transaction=False)
        for klass in classes:
            for name in queue_lists(queues[klass].name):
                pipe.llen(name)
        lengths = iter(pipe.execute())
        for klass in classes:
            depths[klass] = sum(next(lengths) for _ in queue_lists(queues[klass].name))
    result = {}
    for klass in CLASSES:
        queue = queues[klass]
        result[klass] = {
            "queue": queue.name,
            "capacity": queue.capacity,
            "ceiling": queue.ceiling,
            "depth": depths[klass],
        }
    return result


def depth(klass, client=None):
    """The current depth of one class's queue, read on its class's Redis (or ``client``) and nowhere else."""
    client = client or class_redis(klass)
    pipe = client.pipeline(transaction=False)
    for name in queue_lists(sluice_settings().queues[klass].name):
        pipe.llen(name)
    return sum(pipe.execute())


def drain_rate(queue_name, client=None):
    """Messages per second the queue drained over the exporter's window, or None before it measured any."""
    raw = (client or queue_redis(queue_name)).get(keys.drain_rate(queue_name))
    return float(raw) if raw else None


def class_of_queue(queue_name):
    """The class whose queue is called ``queue_name``, or None."""
    queues = sluice_settings().queues
    return next((k for k in CLASSES if queues[k].name == queue_name), None)


def queue_redis(queue_name):
    """The Redis a queue lives on: its class's (an unknown name: background's, where unrouted work goes)."""
    return class_redis(class_of_queue(queue_name) or "background")
