"""Each queue's capacity and current depth: the one API the exporter, the admin and the benchmarks use."""

from pipeline.conf import CLASSES, queue_lists, sluice_settings
from pipeline.connections import class_redis, classes_by_redis, client_of
from pipeline.redis import keys


def snapshot(client=None):
    """{class: {"queue", "capacity", "ceiling", "depth", "partitions"}}, the depths read in one round trip per Redis
    (per partition of a class on a Redis Cluster).

    Depth counts every admitted message that no worker has started: the list and its priority
    sub-lists (workers run with prefetch disabled, so none hides in a worker's buffer).
    """
    queues = sluice_settings().queues
    depths, partitions = {}, {}
    # One round trip per Redis: each class's queue lives on its class's Redis (``client``: all on that one).
    for redis_client, classes in classes_by_redis(client):
        pipe = redis_client.pipeline(transaction=False)
        for klass in classes:
            for name in queue_lists(queues[klass].name):
                pipe.llen(name)
        lengths = iter(pipe.execute())
        for klass in classes:
            found = sum(next(lengths) for _ in queue_lists(queues[klass].name))
            # A class on a Redis Cluster comes once per partition, in order: its depth is their sum.
            depths[klass] = depths.get(klass, 0) + found
            if queues[klass].clustered and client is None:
                partitions.setdefault(klass, []).append(found)
    result = {}
    for klass in CLASSES:
        queue = queues[klass]
        result[klass] = {
            "queue": queue.name,
            "capacity": queue.capacity,
            "ceiling": queue.ceiling,
            "depth": depths[klass],
            # Each partition's depth, for a class on a Redis Cluster.
            "partitions": partitions.get(klass, []),
        }
    return result


def depth(klass, client=None, queue=None):
    """The current depth of one class's queue, read on its class's Redis (or ``client``) and nowhere else; of one
    partition's (``queue``, its QueueConfig) on a Redis Cluster, else the sum of every partition's."""
    whole = sluice_settings().queues[klass]
    parts = [queue] if queue is not None else whole.every_partition
    total = 0
    for part in parts:
        target = client or client_of(part)
        pipe = target.pipeline(transaction=False)
        for name in queue_lists(part.name):
            pipe.llen(name)
        total += sum(pipe.execute())
    return total


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
