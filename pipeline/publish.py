"""Publish one validated event: build its Celery message and admit it to its class queue."""

import json
from dataclasses import dataclass

from kombu.exceptions import OperationalError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from notifications.conf import Kind, sluice_settings
from notifications.exceptions import Unavailable

from .admission import admit
from .message import envelope, redacted
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
        kwargsrepr=redacted(kind.name),
    )


def publish_event(event):
    """Admit ``event`` to its class queue; return its Outcome, or raise Rejected or Unavailable."""
    queue = sluice_settings().queues[event.kind.klass]
    try:
        return admit(event, queue, event_message(event, queue.name))
    except (RedisConnectionError, RedisTimeoutError, OperationalError) as exc:
        raise Unavailable(f"Redis at {_where()} is unavailable ({type(exc).__name__}: {exc}); retry later") from exc


def _where():
    from django.conf import settings

    return settings.REDIS_URL.rsplit("@", 1)[-1]  # never the password
