"""Sluice's public API: notify(), notify_on_commit(), Outcome, and the errors notify() raises."""

from .exceptions import (
    InvalidEntityId,
    InvalidIdempotencyKey,
    InvalidPayload,
    NotifyError,
    PayloadTooLarge,
    Rejected,
    Unavailable,
    UnknownKind,
    UnknownUser,
)
from .outcome import Outcome

__all__ = [
    "InvalidEntityId",
    "InvalidIdempotencyKey",
    "InvalidPayload",
    "NotifyError",
    "Outcome",
    "PayloadTooLarge",
    "Rejected",
    "Unavailable",
    "UnknownKind",
    "UnknownUser",
    "notify",
    "notify_on_commit",
]


def __getattr__(name):
    # notify touches models, which cannot be imported while Django loads its apps.
    if name in ("notify", "notify_on_commit"):
        from . import api

        return getattr(api, name)
    raise AttributeError(name)
