"""The fast path's message is the one Celery and kombu would have written for the same task."""

import base64
import json

from notifications.delivery.tasks import send_tasks
from pipeline.broker.message import envelope


def test_envelope_matches_what_apply_async_writes(redis_client):
    kwargs = {"notification_id": "abc123", "kind": "task.comment", "user_id": 7, "entity_id": "t", "payload": {"a": 1}}
    send_tasks["routine"].apply_async(kwargs=kwargs, task_id="abc123")
    theirs = json.loads(redis_client.rpop("routine"))
    ours = json.loads(envelope("sluice.send.routine", "abc123", json.dumps(kwargs), "routine", "{'kind': 'x'}"))

    assert ours.keys() == theirs.keys()
    assert ours["headers"].keys() == theirs["headers"].keys()
    assert ours["properties"].keys() == theirs["properties"].keys()
    for field in ("lang", "task", "id", "root_id", "retries", "timelimit", "eta", "expires", "group", "stamps"):
        assert ours["headers"][field] == theirs["headers"][field], field
    # reply_to differs by design: Sluice never waits for results, so it names no reply queue.
    same = ("correlation_id", "delivery_mode", "delivery_info", "priority", "body_encoding")
    assert {k: ours["properties"][k] for k in same} == {k: theirs["properties"][k] for k in same}
    assert ours["content-type"] == theirs["content-type"] == "application/json"
    body = json.loads(base64.b64decode(ours["body"]))
    assert body == json.loads(base64.b64decode(theirs["body"]))
    assert isinstance(ours["headers"]["published_at"], float)
