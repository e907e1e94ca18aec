"""Publish a send task for one event: build the message and push it in one round trip."""

import json

from notifications.outcome import Outcome

from .message import envelope
from .queues import queue_for_class, send_task_name
from .store import get_redis


def event_kwargs_json(notification_id, kind, user_id, entity_id, payload_json):
    """The send task's kwargs as a JSON object, splicing in the payload serialised once."""
    head = json.dumps(
        {"notification_id": notification_id, "kind": kind, "user_id": user_id, "entity_id": entity_id},
        separators=(",", ":"),
    )
    return f'{head[:-1]},"payload":{payload_json}}}'


def publish_event(kind, notification_id, user_id, entity_id, payload_json):
    """Publish one event of ``kind`` (a notifications.conf.Kind) to its class queue."""
    klass = kind.klass
    queue = queue_for_class(klass)
    message = envelope(
        send_task_name(klass),
        notification_id,
        event_kwargs_json(notification_id, kind.name, user_id, entity_id, payload_json),
        queue,
        kwargsrepr=f"{{'kind': {kind.name!r}}}",
    )
    get_redis().lpush(queue, message)
    return Outcome.ACCEPTED
