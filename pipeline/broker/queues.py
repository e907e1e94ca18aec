"""Queues and routing as data: kind -> class (SLUICE_KINDS) -> queue (SLUICE_QUEUES)."""

from kombu import Queue

from pipeline.conf import CLASSES, sluice_settings

SEND_TASK = "sluice.send.{klass}"


def send_task_name(klass):
    """The send task of a class; each class has its own so it carries its own ack policy."""
    return SEND_TASK.format(klass=klass)


def queue_for_class(klass):
    """The Celery queue a publish to a class goes to: its own, or its first partition's on a Redis Cluster."""
    return sluice_settings().queues[klass].published_to


def queues_of_class(klass):
    """Every Celery queue of a class, comma separated: its own, or each of its partitions' on a Redis Cluster."""
    return ",".join(sluice_settings().queues[klass].queue_names)


def queue_for_kind(kind):
    """The Celery queue name an event of this kind is published to."""
    return queue_for_class(sluice_settings().kinds[kind].klass)


#: The exchange the class queues are bound to, each by its own name as the routing key.
EXCHANGE = "sluice"


def celery_queue_settings():
    """Celery settings that declare exactly the three class queues and route to them."""
    queues = sluice_settings().queues
    routes = {send_task_name(k): {"queue": queues[k].published_to} for k in CLASSES}
    # Control work (flush, overflow drain, the inbox escalations' tick) must not wait behind the backlog it relieves
    # or the background flood it would sit in; the critical pool is sized for latency and mostly idle, so it runs
    # these short tasks at once, each a bounded step (pipeline.housekeeping). The escalations themselves run on their
    # class's own pool: the tick only asks it for a step (notifications.inbox.tasks).
    for control in ("sluice.digest.flush", "sluice.overflow.drain", "sluice.inbox.escalate"):
        routes[control] = {"queue": queues["critical"].published_to}
    return {
        "task_queues": tuple(Queue(name, routing_key=name) for k in CLASSES for name in queues[k].queue_names),
        # Anything unrouted lands on a watched, ceilinged queue, never on an unwatched "celery".
        "task_default_queue": queues["background"].published_to,
        "task_default_routing_key": queues["background"].published_to,
        # One direct exchange for the three queues, named neutrally: Celery would name it after the default queue,
        # and a worker's banner would show critical bound to an exchange called "background".
        "task_default_exchange": EXCHANGE,
        "task_default_exchange_type": "direct",
        "task_routes": routes,
    }
