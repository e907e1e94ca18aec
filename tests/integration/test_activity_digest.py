"""Issue 40: a flush writes which digest message carried which fold keys, so a digest's notification id leads back
to the events it listed; each event's entry names the fold key it went into."""

import json

import pytest

from digest.flush import run_flush
from notifications import Outcome, notify, preferences
from pipeline import activity_fields
from pipeline.redis import keys
from tests.digest_helpers import published

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(60)]


def entries(client):
    return [activity_fields.decode(fields) for _id, fields in client.xrange(keys.activity())]


def test_a_digest_entry_lists_the_fold_keys_its_events_went_into(redis_client, user):
    preferences.set(user, mode="digest")
    assert notify(user, "task.comment", entity_id="t1", payload={"title": "Fix login"}) is Outcome.FOLDED
    assert notify(user, "task.comment", entity_id="t1") is Outcome.FOLDED
    assert notify(user, "task.assigned", entity_id="t2") is Outcome.FOLDED
    assert run_flush("test") >= 1
    log = entries(redis_client)
    folded = [e for e in log if e.outcome == "folded"]
    digests = [e for e in log if e.outcome == "digested"]
    assert [e.reason for e in folded] == ["preference"] * 3
    assert digests, "the flush wrote the digest's entry"
    listed = {member for d in digests for member in json.loads(d.fold)}
    assert {e.fold for e in folded} <= listed
    messages = published(redis_client)
    assert {d.notification for d in digests} == {m["notification_id"] for m in messages}
    assert sum(int(d.detail) for d in digests) == sum(m.get("count", 1) for m in messages)
