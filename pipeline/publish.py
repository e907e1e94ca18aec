"""Publish one validated event: build its Celery message and admit it to its class queue."""

import json
from dataclasses import dataclass

from notifications.conf import Kind, sluice_settings

from .admission import admit
from .message import envelope
from .queues import send_task_name


@dataclass(frozen=True, slots=True)
class Event:
    """A validated event, ready to publish."""

    kind: Kind
    notification_id: str
    user_id: object
    entity_id: str
    payload_json: str


def event_kwargs_json(notification_id, kind, user_id, entity_id, payload_json, **extra):
    """The send task's kwargs as a JSON object, splicing in the payload serialised once."""
    head = json.dumps(
        {"notification_id": notification_id, "kind": kind, "user_id": user_id, "entity_id": entity_id, **extra},
        separators=(",", ":"),
    )
    return f'{head[:-1]},"payload":{payload_json}}}'


def event_message(event, queue_name):
    """The Celery message that sends ``event``."""
    kind = event.kind
    return envelope(
        send_task_name(kind.klass),
        event.notification_id,
        event_kwargs_json(event.notification_id, kind.name, event.user_id, event.entity_id, event.payload_json),
        queue_name,
        kwargsrepr=f"{{'kind': {kind.name!r}}}",
    )


def publish_event(event):
    """Admit ``event`` to its class queue; return its Outcome or raise Rejected."""
    queue = sluice_settings().queues[event.kind.klass]
    return admit(event, queue, event_message(event, queue.name))
