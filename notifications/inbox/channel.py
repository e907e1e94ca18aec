"""The inbox channel backend: a send writes (or folds into) the user's inbox item, like any channel's send."""

from contextlib import nullcontext

from django.utils import translation
from redis.exceptions import RedisError

from pipeline.conf import sluice_settings

from ..channels.base import BaseChannel, TransientSendError
from . import escalation, fold, unread


class InboxChannel(BaseChannel):
    """Writes the user's inbox item (notifications.inbox.fold), then brings the user's unread count in step and
    schedules the item's escalation. No options.

    A failure after the row was written is retried like any transient one: the retry finds its notification folded
    in already (the item's last_notification), adds nothing, and does the Redis part again."""

    def send(self, message):
        # The item's title and body are rendered here, in the language the message was (its reader's).
        with translation.override(message.language) if message.language else nullcontext():
            written = fold.write(message)
        try:
            unread.refresh(message.user_id)
            if written.item.unread:
                escalation.schedule(written.item, sluice_settings().kinds[message.kind])
        except RedisError as exc:
            raise TransientSendError(f"the inbox item is written, its Redis part failed: {type(exc).__name__}") from exc
        return None
