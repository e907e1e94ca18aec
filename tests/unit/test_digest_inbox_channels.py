"""A kind sent to the inbox and to other channels: listed in the user's digest on the others, its own message to the
inbox (which folds by entity itself), all released in one step."""

import pytest

from digest.flush import run_flush
from pipeline.redis import keys
from tests.digest_helpers import fold, published

LOCMEM = "notifications.channels.locmem.LocmemChannel"
INBOX = "notifications.inbox.channel.InboxChannel"

# Changing SLUICE_CHANNELS rebuilds the preferences' mirror, which reads the database.
pytestmark = pytest.mark.django_db


def setup_kinds(settings):
    settings.SLUICE_CHANNELS = {"email": {"backend": LOCMEM}, "sms": {"backend": LOCMEM}, "inbox": {"backend": INBOX}}
    settings.SLUICE_KINDS = {
        "doc.shared": {"class": "routine", "channels": ["inbox", "email"]},
        "doc.changed": {"class": "routine", "channels": ["inbox"]},
        "task.assigned": {"class": "routine", "channels": ["email", "sms"]},
    }


def test_the_inbox_gets_each_fold_on_its_own_and_email_one_digest(redis_client, settings):
    setup_kinds(settings)
    for entity in ("d1", "d2"):
        fold(3, kind="doc.shared", entity_id=entity)
        fold(3, kind="doc.shared", entity_id=entity)
    fold(3, kind="doc.changed", entity_id="d9")
    fold(3, kind="task.assigned", entity_id="t1")
    run_flush("test")
    messages = published(redis_client)

    digests = [m for m in messages if "digest" in m]
    by_channel = {m["channels"][0]: sorted((i["kind"], i["entity_id"]) for i in m["digest"]["items"]) for m in digests}
    assert by_channel == {
        "email": [("doc.shared", "d1"), ("doc.shared", "d2"), ("task.assigned", "t1")],
        "sms": [("task.assigned", "t1")],
    }
    own = sorted((m["kind"], m["entity_id"], m["count"], m.get("channels")) for m in messages if "digest" not in m)
    inbox = ["inbox"]
    assert own == [("doc.changed", "d9", 1, None), ("doc.shared", "d1", 2, inbox), ("doc.shared", "d2", 2, inbox)]
    assert not redis_client.zcard(keys.pending())  # every key released


def test_a_single_fold_of_a_mixed_kind_keeps_one_message_on_all_its_channels(redis_client, settings):
    setup_kinds(settings)
    fold(4, kind="doc.shared", entity_id="d1")
    run_flush("test")
    [message] = published(redis_client)
    assert ("digest" in message, message.get("channels"), message["entity_id"]) == (False, None, "d1")
