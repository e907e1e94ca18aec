"""The inbox tests' settings and helpers: an inbox channel beside the locmem ones, and kinds that use it."""

import uuid

import pytest

from notifications.channels.base import Message

INBOX = "notifications.inbox.channel.InboxChannel"
LOCMEM = "notifications.channels.locmem.LocmemChannel"

INBOX_KINDS = {
    "doc.changed": {
        "class": "routine",
        "channels": ["inbox"],
        "url": "/docs/{entity_id}/",
        "escalate": {"after_s": 900, "channels": ["email"]},
    },
    "doc.shared": {"class": "routine", "channels": ["inbox", "email"]},
    "task.assigned": {"class": "routine", "channels": ["email"]},
}


@pytest.fixture
def inbox_settings(settings, locmem_channels, redis_client):
    """The inbox channel and INBOX_KINDS; the locmem outbox (email, sms, push) starts empty."""
    settings.SLUICE_CHANNELS = {
        **{name: {"backend": LOCMEM} for name in ("email", "sms", "push")},
        "inbox": {"backend": INBOX},
    }
    settings.SLUICE_KINDS = INBOX_KINDS
    return locmem_channels


def inbox_message(user_id, kind="doc.changed", entity_id="d1", count=1, payload=None, notification_id=None):
    """A rendered message for the inbox channel, as the send engine hands it over."""
    return Message(
        id=notification_id or uuid.uuid4().hex,
        channel="inbox",
        kind=kind,
        klass="routine",
        user_id=user_id,
        entity_id=entity_id,
        subject="",
        body="",
        payload=payload if payload is not None else {"title": f"Doc {entity_id}"},
        count=count,
    )
