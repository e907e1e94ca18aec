"""Each user's unread count, served from Redis and kept in step with the database after every change.

Every change to a user's items (a send, a fold, a read, an archive, a prune) recounts that user's unread items
once its transaction commits, and writes the count only if no later count was written (lua/set_unread.lua): the
poll that every page load makes then reads one Redis hash and never the database. A count Redis lost (a restart,
its expiry after an idle month) is counted again at the next poll.
"""

from pathlib import Path

from django.db import transaction

from pipeline.connections import Scripts, get_redis
from pipeline.redis import keys

script = Scripts(Path(__file__).with_name("lua"))
# An idle user's count leaves Redis after this; the next poll counts it again (one query).
TTL_S = 30 * 86400


def count_in_database(user_id):
    from notifications.inbox.models import InboxItem

    return InboxItem.objects.filter(user_id=user_id, read_at__isnull=True, archived_at__isnull=True).count()


def refresh(user_id):
    """Recount ``user_id``'s unread items and write the count unless a later one is there; return the count."""
    client = get_redis()
    key = keys.inbox_unread(user_id)
    # The generation first, then the count: see lua/set_unread.lua for why that order keeps the latest count.
    generation = client.hincrby(key, "g", 1)
    count = count_in_database(user_id)
    script("set_unread", on=client)(keys=[key], args=[generation, count, TTL_S])
    return count


def refresh_on_commit(user_id):
    """Refresh the count once the current transaction commits (at once outside one)."""
    transaction.on_commit(lambda: refresh(user_id))


def read(user_id):
    """(count, version) for the poll: from Redis, or counted again when Redis has none. ``version`` changes with
    every count written, for the response's ETag."""
    count, version = get_redis().hmget(keys.inbox_unread(user_id), "n", "w")
    if count is None:
        count = refresh(user_id)
        count, version = get_redis().hmget(keys.inbox_unread(user_id), "n", "w")
    return int(count or 0), int(version or 0)
