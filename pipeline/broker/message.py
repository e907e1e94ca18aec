"""Build a standard Celery protocol-2 message, as kombu's Redis transport stores it, without kombu.

kombu builds a new producer and redis client for every apply_async (DESIGN.md, "Measured"); the
bytes are the same, so the fast path builds them here, from a template of the constant parts, and
pushes them in one round trip. tests/unit/test_message.py checks them against kombu's own.
"""

import base64
import json
import os
import socket
import time
from datetime import UTC, datetime
from functools import lru_cache
from typing import NamedTuple

from pipeline.broker.publish_stamp import PUBLISHED_AT
from pipeline.broker.queues import send_task_name

#: The header that restricts a send to some of its kind's channels (what a user's preferences left on).
CHANNELS_HEADER = "sluice_channels"

_EMBED = '{"callbacks":null,"errbacks":null,"chain":null,"chord":null}'
# Every field of Celery's as_task_v2 headers and kombu's properties, in their order; the %(...)s
# slots take values that are already JSON.
_TEMPLATE = (
    '{"body":"%(body)s","content-encoding":"utf-8","content-type":"application/json",'
    '"headers":{"lang":"py","task":%(task)s,"id":"%(id)s","shadow":null,"eta":%(eta)s,"expires":null,'
    '"group":null,"group_index":null,"retries":%(retries)d,"timelimit":[null,null],"root_id":"%(id)s",'
    '"parent_id":null,"argsrepr":"()","kwargsrepr":%(kwargsrepr)s,"origin":%(origin)s,'
    '"ignore_result":true,"replaced_task_nesting":0,"stamped_headers":null,"stamps":{},'
    '"' + PUBLISHED_AT + '":%(published_at)r%(extra_headers)s},'
    '"properties":{"correlation_id":"%(id)s","reply_to":"","delivery_mode":2,'
    '"delivery_info":{"exchange":"","routing_key":%(queue)s},"priority":0,"body_encoding":"base64",'
    '"delivery_tag":"%(tag)s"}}'
)
_origin = {}


def origin():
    """Celery's anonymous node name for this process, as a JSON string (cached per process)."""
    pid = os.getpid()
    if pid not in _origin:
        _origin.clear()
        _origin[pid] = json.dumps(f"gen{pid}@{socket.gethostname()}")
    return _origin[pid]


def envelope(
    task_name, task_id, kwargs_json, queue, kwargsrepr, published_at=None, retries=0, eta=None, channels_header=None
):
    """The JSON text of one task message, ready to LPUSH onto ``queue``.

    ``task_id`` must be JSON-safe (Sluice's ids are hex). ``kwargs_json`` is the task's keyword
    arguments already serialised as a JSON object, so a payload validated once by notify() is never
    serialised twice. ``kwargsrepr`` is what Flower and the logs show instead of the arguments,
    which hold personal data. ``retries`` and ``eta`` (seconds since the epoch) are for a retry.
    ``channels_header`` (JSON text, or a placeholder admission fills in) restricts the channels it is sent on.
    """
    body = base64.b64encode(f"[[],{kwargs_json},{_EMBED}]".encode()).decode()
    a, b, c, d, e, f = _runs(task_name, queue, kwargsrepr, retries, eta, channels_header)
    published = time.time() if published_at is None else float(published_at)
    # The runs of the template that do not change from one message to the next are joined once per kind of message
    # (_runs): notify() builds a message a call, and a % of a dozen named fields was a tenth of its own CPU.
    return "".join(
        ('{"body":"', body, a, task_id, b, task_id, c, origin(), d, repr(published), e, task_id, f, _tag(), '"}}')
    )


def batch_envelope(task_name, queue, kwargsrepr, kwargs_tail, channels_header):
    """envelope() for a batch of messages that differ only in their task id and user (admission's batch: one kind,
    entity and payload), cut into parts that admit_batch.lua joins with each message's own values:

        parts[1] body_head(id, user) parts[2] id parts[3] id parts[4] channels parts[5] id parts[6] tag parts[7]

    where channels is the JSON header that stood at ``channels_header`` (a placeholder). ``kwargs_tail`` is the kwargs
    object after its id and user, from its third field: '"kind":...,"payload":{...}}'. The joined text is the message
    envelope() makes of the same values, but for the body's JSON, which spaces its head to whole base64 groups."""
    a, b, c, d, e, f = _runs(task_name, queue, kwargsrepr, 0, None, channels_header)
    before, after = e.split(channels_header, 1)
    tail = base64.b64encode(f"{kwargs_tail},{_EMBED}]".encode()).decode()
    published = repr(time.time())
    return ('{"body":"', tail + a, b, c + origin() + d + published + before, after, f, '"}}')


def body_head(task_id, user_id):
    """The base64 of a batch message's body up to its kwargs' third field (batch_envelope): the id and the user, the
    text spaced to a whole number of base64 groups so that it and the shared rest encode apart."""
    user = int.__repr__(user_id) if type(user_id) is int else json.dumps(user_id, ensure_ascii=False)
    head = f'[[],{{"notification_id":"{task_id}","user_id":{user},'.encode()
    return base64.b64encode(head + b" " * (-len(head) % 3)).decode()


def tag_of(task_id):
    """A delivery tag made of a task id's own random hex (Sluice's ids are 32 random hex digits), as _tag() spells one:
    a batch draws no second random number per message."""
    h = task_id
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{h[16:20]}-{h[20:]}"


@lru_cache(maxsize=1024)
def _runs(task_name, queue, kwargsrepr, retries, eta, channels_header):
    """The constant runs of _TEMPLATE around one kind of message's per-message values (its id, origin, time, tag)."""
    fields = {
        "body": "\0",
        "task": _json(task_name),
        "id": "\1",
        "kwargsrepr": _json(kwargsrepr),
        "origin": "\2",
        "published_at": "\3",
        "retries": retries,
        "eta": "null" if eta is None else json.dumps(datetime.fromtimestamp(eta, UTC).isoformat()),
        "extra_headers": "" if channels_header is None else f',"{CHANNELS_HEADER}":{channels_header}',
        "queue": _json(queue),
        "tag": "\4",
    }
    # The template filled with markers, then cut at them: one template to read, however it is assembled.
    text = _TEMPLATE.replace("%(published_at)r", "%(published_at)s") % fields
    head, rest = text.split("\0")
    a, b, middle, last = rest.split("\1")  # the id: the task's, the root's and the correlation's
    c, rest = middle.split("\2")
    d, e = rest.split("\3")
    f, end = last.split("\4")
    if (head, end) != ('{"body":"', '"}}'):
        raise ValueError("the message template must begin with its body and end with its delivery tag")
    return a, b, c, d, e, f


def _tag():
    """A delivery tag: a random UUID's text, as kombu writes one, without uuid4()'s cost."""
    h = os.urandom(16).hex()
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{h[16:20]}-{h[20:]}"


@lru_cache(maxsize=256)
def _json(text):
    # Task names, queues and reprs repeat on every publish: serialise each once.
    return json.dumps(text)


def event_kwargs_json(notification_id, kind, user_id, entity_id, payload_json, **extra):
    """A send task's kwargs as a JSON object, splicing in the payload that notify() serialised once."""
    if extra:
        head = json.dumps(
            {"notification_id": notification_id, "kind": kind, "user_id": user_id, "entity_id": entity_id, **extra},
            separators=(",", ":"),
            ensure_ascii=False,
        )
        return f'{head[:-1]},"payload":{payload_json}}}'
    # notify()'s own: the same text, by parts (a kind's JSON once per kind, an int user id as its digits).
    user = int.__repr__(user_id) if type(user_id) is int else json.dumps(user_id, ensure_ascii=False)
    return (
        f'{{"notification_id":{json.dumps(notification_id)},"kind":{_json(kind)},"user_id":{user},'
        f'"entity_id":{json.dumps(entity_id, ensure_ascii=False)},"payload":{payload_json}}}'
    )


def send_message(klass, task_id, kwargs_json, queue, kind, count=1, **options):
    """The message of one send task (sluice.send.<class>): every publish of one goes through here (first
    publish, digest, retry, requeue, dead-letter replay), so each carries the same redacted repr."""
    return envelope(send_task_name(klass), task_id, kwargs_json, queue, redacted(kind, count), **options)


class SendMessage(NamedTuple):
    """What a send engine needs of one task message read back from its queue."""

    task: str
    id: str
    kwargs: dict
    retries: int
    published_at: float | None
    eta: str | None
    channels: list | None


def read_send_message(raw):
    """Read back a task message as envelope() writes it (and Celery does); None when it cannot be read."""
    try:
        message = json.loads(raw)
        headers = message["headers"]
        body = message["body"]
        if message.get("properties", {}).get("body_encoding") == "base64":
            body = base64.b64decode(body)
        _args, kwargs, _embed = json.loads(body)
        return SendMessage(
            task=headers.get("task"),
            id=headers.get("id"),
            kwargs=kwargs,
            retries=headers.get("retries") or 0,
            published_at=headers.get(PUBLISHED_AT),
            eta=headers.get("eta"),
            channels=headers.get(CHANNELS_HEADER),
        )
    except (ValueError, KeyError, TypeError):
        return None


def redacted(kind, count=1):
    """The argument repr every send message carries: the kind (and a digest's count), never the user, the
    entity or the payload, which Flower, events and logs would otherwise show."""
    return f"{{'kind': {kind!r}, 'count': {count}}}" if count != 1 else f"{{'kind': {kind!r}}}"
