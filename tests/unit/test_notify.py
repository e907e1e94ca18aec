"""notify(): validation errors publish nothing; accepted events land on their class queue."""

import base64
import json

import pytest
from django.db import transaction

from notifications import (
    InvalidEntityId,
    InvalidPayload,
    Outcome,
    PayloadTooLarge,
    UnknownKind,
    UnknownUser,
    notify,
    notify_on_commit,
)

QUEUES = ("critical", "routine", "background", "celery")


def depths(client):
    return {q: client.llen(q) for q in QUEUES}


def only_message(client, queue):
    assert client.llen(queue) == 1
    return json.loads(client.lindex(queue, 0))


@pytest.mark.parametrize(
    ("kind", "queue"),
    [("meeting.reminder", "critical"), ("task.assigned", "routine"), ("board.updated", "background")],
)
def test_event_lands_on_its_class_queue_as_a_celery_message(redis_client, user, kind, queue):
    assert notify(user, kind, entity_id="e1", payload={"title": "Q3"}) is Outcome.ACCEPTED
    message = only_message(redis_client, queue)
    assert sum(depths(redis_client).values()) == 1
    headers = message["headers"]
    assert headers["task"] == f"sluice.send.{queue}"
    assert isinstance(headers["published_at"], float)
    assert message["properties"]["delivery_info"]["routing_key"] == queue
    args, kwargs, _embed = json.loads(base64.b64decode(message["body"]))
    assert args == []
    assert kwargs == {
        "notification_id": headers["id"],
        "kind": kind,
        "user_id": user.pk,
        "entity_id": "e1",
        "payload": {"title": "Q3"},
    }
    # Personal data stays out of what Flower and the logs show.
    assert "Q3" not in headers["kwargsrepr"]


def test_user_given_by_primary_key(redis_client, user):
    assert notify(user.pk, "task.comment", entity_id="t", payload={}) is Outcome.ACCEPTED
    assert notify(str(user.pk), "task.comment", entity_id="t") is Outcome.ACCEPTED
    assert redis_client.llen("routine") == 2


@pytest.mark.parametrize(
    ("args", "error", "words"),
    [
        (("task.nope", "e"), UnknownKind, "unknown notification kind 'task.nope'"),
        ((None, "e"), UnknownKind, "unknown notification kind None"),
        (("task.assigned", ""), InvalidEntityId, "must not be empty"),
        (("task.assigned", "x" * 201), InvalidEntityId, "201 characters; the limit is 200"),
        (("task.assigned", ["e"]), InvalidEntityId, "must be a string, got list"),
        (("task.assigned", "a\x00b"), InvalidEntityId, "control characters"),
    ],
)
def test_bad_kind_or_entity_is_refused_and_nothing_is_published(redis_client, user, args, error, words):
    kind, entity_id = args
    with pytest.raises(error, match=words.replace("(", r"\(")):
        notify(user, kind, entity_id=entity_id, payload={})
    assert sum(depths(redis_client).values()) == 0


@pytest.mark.parametrize(
    ("payload", "error", "words"),
    [
        ({"when": object()}, InvalidPayload, "not JSON-serialisable"),
        ({"x": float("nan")}, InvalidPayload, "not JSON-serialisable"),
        ([1, 2], InvalidPayload, "must be a dict, got list"),
        ({"blob": "x" * 17000}, PayloadTooLarge, "SLUICE_MAX_PAYLOAD_BYTES is 16384"),
        ({"bad": "\ud800"}, InvalidPayload, "lone surrogate"),
        # PostgreSQL stores U+0000 neither in text nor in jsonb: the inbox's write could only fail, six times.
        ({"title": "a\x00b"}, InvalidPayload, r"U\+0000"),
        ({"a\x00": 1}, InvalidPayload, r"U\+0000"),
        ({"deep": [{"x": ["ok", "\x00"]}]}, InvalidPayload, r"U\+0000"),
        ({"\\": "\\\x00"}, InvalidPayload, r"U\+0000"),
    ],
)
def test_bad_payload_is_refused_and_nothing_is_published(redis_client, user, payload, error, words):
    with pytest.raises(error, match=words):
        notify(user, "task.assigned", entity_id="e", payload=payload)
    assert sum(depths(redis_client).values()) == 0


@pytest.mark.parametrize("text", ["\\u0000", "\\\\u0000", "u0000", "\x01", "\\\\\\u0000x"])
def test_text_that_only_reads_like_a_nul_is_accepted(redis_client, user, text):
    """A backslash written out before "u0000" is not U+0000, and other control characters are stored fine."""
    assert notify(user, "task.assigned", entity_id="e", payload={text: text}) is Outcome.ACCEPTED


@pytest.mark.parametrize("who", [987654, "987654", "not-a-pk", 1.5, None, True])
def test_missing_or_malformed_user_is_refused(redis_client, db, who):
    with pytest.raises(UnknownUser):
        notify(who, "meeting.reminder", entity_id="m1")
    assert sum(depths(redis_client).values()) == 0


def test_unsaved_user_is_refused(redis_client, db, django_user_model):
    with pytest.raises(UnknownUser, match="save it"):
        notify(django_user_model(username="ghost"), "meeting.reminder", entity_id="m1")


def test_payload_limit_follows_the_setting(redis_client, user, settings):
    settings.SLUICE_MAX_PAYLOAD_BYTES = 64
    notify(user, "task.assigned", entity_id="e", payload={"t": "x" * 40})
    with pytest.raises(PayloadTooLarge, match="is 64"):
        notify(user, "task.assigned", entity_id="e", payload={"t": "x" * 80})


def test_notify_on_commit_publishes_only_after_commit(redis_client, user, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        with transaction.atomic():
            notify_on_commit(user, "task.assigned", entity_id="e")
            assert redis_client.llen("routine") == 0
    assert redis_client.llen("routine") == 1


@pytest.mark.django_db(transaction=True)
def test_notify_on_commit_publishes_nothing_on_rollback(redis_client, django_user_model):
    user = django_user_model.objects.create_user("bo")
    with pytest.raises(RuntimeError), transaction.atomic():
        notify_on_commit(user, "task.assigned", entity_id="e")
        raise RuntimeError("roll back")
    with transaction.atomic():
        notify_on_commit(user, "task.assigned", entity_id="e")
    assert redis_client.llen("routine") == 1


def test_notify_on_commit_validates_at_once(redis_client, user):
    with pytest.raises(UnknownKind), transaction.atomic():
        notify_on_commit(user, "nope", entity_id="e")
