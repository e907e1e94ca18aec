"""Helpers for digest tests: fold events straight into the store, and read what a flush published."""

import base64
import json

from digest import store

MESSAGE = "unused: the user has not opted out"


def fold(user_id, kind="task.comment", entity_id="t1", payload=None, klass="routine", max_keys=10_000):
    """Fold one event as admission does when the queue is full."""
    return store.fold(klass, user_id, kind, entity_id, json.dumps(payload or {}), MESSAGE, 100, max_keys)


def published(client, queue="routine"):
    """The send-task kwargs of every message in ``queue``, oldest first."""
    return [json.loads(base64.b64decode(json.loads(raw)["body"]))[1] for raw in reversed(client.lrange(queue, 0, -1))]
