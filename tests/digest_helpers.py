"""Helpers for digest tests: fold events straight into the store, and read what a flush published."""

import base64
import dataclasses
import json
import uuid

from pipeline.admission.event import Event
from pipeline.admission.runner import admit
from pipeline.conf import sluice_settings


def fold(user_id, kind="task.comment", entity_id="t1", payload=None, max_keys=10_000):
    """Fold one event as admission does when its queue is full; return the Admission."""
    conf = sluice_settings()
    found = conf.kinds[kind]
    full = dataclasses.replace(conf.queues[found.klass], capacity=0, ceiling=1_000_000)
    event = Event(found, uuid.uuid4().hex, user_id, entity_id, json.dumps(payload or {}))
    digest = dataclasses.replace(conf.digest, max_keys=max_keys)
    return admit(event, full, digest)


def published(client, queue="routine"):
    """The send-task kwargs of every message in ``queue``, oldest first."""
    return [json.loads(base64.b64decode(json.loads(raw)["body"]))[1] for raw in reversed(client.lrange(queue, 0, -1))]
