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


def test_a_batch_envelope_joined_is_the_envelope_of_the_same_values():
    from pipeline.broker.message import batch_envelope, body_head, read_send_message, redacted, tag_of

    task_id, user = "0123456789abcdef0123456789abcdef", "user-ü"
    payload = '{"title":"Q3 ✓"}'
    placeholder = '"@CHANNELS@"'
    parts = batch_envelope(
        "sluice.send.routine",
        "routine",
        redacted("task.comment"),
        f'"kind":"task.comment","entity_id":"t","payload":{payload}}}',
        placeholder,
    )
    values = (body_head(task_id, user), task_id, task_id, '["email"]', task_id, tag_of(task_id))
    joined = parts[0] + "".join(value + part for value, part in zip(values, parts[1:], strict=True))
    kwargs = json.dumps(
        {
            "notification_id": task_id,
            "kind": "task.comment",
            "user_id": user,
            "entity_id": "t",
            "payload": {"title": "Q3 ✓"},
        }
    )
    single = envelope(
        "sluice.send.routine", task_id, kwargs, "routine", redacted("task.comment"), channels_header='["email"]'
    )
    ours, theirs = json.loads(joined), json.loads(single)
    assert read_send_message(joined)._replace(published_at=None) == read_send_message(single)._replace(
        published_at=None
    )
    for message in (ours, theirs):
        message["headers"].pop("published_at")
        message["properties"].pop("delivery_tag")
        message.pop("body")
    assert ours == theirs
    assert len(body_head(task_id, 7)) % 4 == 0  # whole base64 groups: the shared rest encodes apart
