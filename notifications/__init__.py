"""Sluice's public API: notify(), notify_on_commit(), notify_many(), cancel_scheduled(), subscribe(), unsubscribe(),
notify_topic(), Outcome, and the errors notify() raises."""

from .exceptions import (
    InvalidEntityId,
    InvalidIdempotencyKey,
    InvalidPayload,
    InvalidSchedule,
    InvalidTopic,
    NotifyError,
    PayloadTooLarge,
    Rejected,
    ScheduleFull,
    Unavailable,
    UnknownKind,
    UnknownUser,
)
from .outcome import Outcome

__all__ = [
    "InvalidEntityId",
    "InvalidIdempotencyKey",
    "InvalidPayload",
    "InvalidSchedule",
    "InvalidTopic",
    "NotifyError",
    "Outcome",
    "PayloadTooLarge",
    "Rejected",
    "ScheduleFull",
    "Unavailable",
    "UnknownKind",
    "UnknownUser",
    "cancel_scheduled",
    "notify",
    "notify_many",
    "notify_on_commit",
    "notify_topic",
    "subscribe",
    "unsubscribe",
]


def __getattr__(name):
    # notify touches models, which cannot be imported while Django loads its apps.
    if name in ("notify", "notify_on_commit", "notify_many"):
        from . import api

        return getattr(api, name)
    if name == "cancel_scheduled":
        from .scheduling import api as scheduling

        return scheduling.cancel_scheduled
    # notify_topic_in_scope: ingest's notify_topic() for a service (its own idempotency scope); not public.
    if name in ("subscribe", "unsubscribe", "notify_topic", "notify_topic_in_scope"):
        from .topics import api as topics

        return getattr(topics, name)
    raise AttributeError(name)
