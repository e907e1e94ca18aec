"""An event as admission takes it, and what it is admitted with: its Celery message and its kind's default plan."""

import json
import time
from dataclasses import dataclass
from functools import lru_cache

from pipeline.admission import wire
from pipeline.broker.message import batch_envelope, event_kwargs_json, redacted, send_message
from pipeline.broker.queues import send_task_name
from pipeline.conf import sluice_settings
from pipeline.conf.kinds import Kind


@dataclass(frozen=True, slots=True)
class Event:
    """A validated event, ready to admit (notifications.api validates what a caller gives; other ways in, such as an
    inbox item's escalation, build one themselves)."""

    kind: Kind
    notification_id: str
    # The user's pk as JSON carries it: an int, or its text.
    user_id: object
    entity_id: str
    payload_json: str
    # The caller's idempotency key as its Redis key (pipeline.redis.keys.idempotency: scoped and hashed), or None.
    idempotency: str | None = None
    # A user id that does not exist, from a caller who may not learn so (ingest without reveal): nothing is published,
    # and the key is recorded and replayed as a real event's.
    unknown_user: bool = False
    # How many events it stands for: more than one for an inbox item that folded several.
    count: int = 1
    # An inbox item's escalation: its channels, to which the user's plan for the kind is narrowed; None otherwise.
    escalation: tuple | None = None
    # How long its idempotency key is kept; None: SLUICE_IDEMPOTENCY_TTL_S.
    idempotency_ttl_s: int | None = None
    # A scheduled send's time (Unix seconds): its kind's expiry counts from it, and its send measures its lateness.
    send_at: float | None = None
    # What the activity log keeps of its payload to explain a step (pipeline.activity_fields.title_of): "" for none.
    title: str = ""


def message_of(event, queue_name):
    """The Celery message that sends ``event`` from ``queue_name``, with wire.CHANNELS_PLACEHOLDER where
    the channels header goes (only the Lua fills it in). The builder of an admitted event's message (a batch's is
    the same message, cut into parts: batch_parts)."""
    kind = event.kind
    kwargs = event_kwargs_json(
        event.notification_id, kind.name, event.user_id, event.entity_id, event.payload_json, **_extra(event)
    )
    return send_message(
        kind.klass,
        event.notification_id,
        kwargs,
        queue_name,
        kind.name,
        event.count,
        channels_header=wire.CHANNELS_PLACEHOLDER,
    )


def _extra(event, now=None):
    """The send's kwargs beyond its id, kind, user, entity and payload: a kind that expires carries its deadline
    (counted from its send_at, for a scheduled send; else from ``now``), so that retries and replays keep the event's
    own."""
    kind, extra = event.kind, {}
    if kind.expires_after_s:
        extra["expires_at"] = round((event.send_at or now or time.time()) + kind.expires_after_s, 3)
    if event.count != 1:
        extra["count"] = event.count
    if event.send_at is not None:
        extra["send_at"] = event.send_at
    return extra


def batch_share(event):
    """What a batch's events must have alike to share their message's parts (batch_parts): all but their user."""
    return event.kind.name, event.entity_id, event.payload_json, event.count, event.send_at


def batch_parts(event, queue_name, now):
    """The parts of ``event``'s message that a batch's events alike (batch_share) share, as
    pipeline.broker.message.batch_envelope cuts them: the message is message_of()'s, joined by admit_batch.lua with
    each event's body_head(), id and tag. A deadline counts from the batch's ``now``."""
    kind, extra = event.kind, _extra(event, now)
    fields = {"kind": kind.name, "entity_id": event.entity_id, **extra}
    tail = json.dumps(fields, separators=(",", ":"), ensure_ascii=False)[1:-1]
    return batch_envelope(
        send_task_name(kind.klass),
        queue_name,
        redacted(kind.name, event.count),
        f'{tail},"payload":{event.payload_json}}}',
        wire.CHANNELS_PLACEHOLDER,
    )


@lru_cache(maxsize=64)
def default_plan(kind):
    """What admission does for a user who chose nothing (pipeline.admission.wire.encode_plan); cached: the hot path."""
    instant = kind.default_mode == "instant"
    return wire.encode_plan(kind.channels if instant else (), () if instant else kind.channels, False)


def key_ttl(event):
    """How long ``event``'s idempotency key is kept: its own, else SLUICE_IDEMPOTENCY_TTL_S."""
    return sluice_settings().idempotency_ttl_s if event.idempotency_ttl_s is None else event.idempotency_ttl_s
