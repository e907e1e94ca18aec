"""Dead letters: the messages that cannot be sent, kept in a bounded list in Redis, listed and replayed.

A send task never drops a message it could not handle: retries exhausted, a kind since removed, a
permanent failure at the provider. It hands the message here with its reason and moves on. The list
is bounded (SLUICE_DEAD_LETTERS_MAX); when it is full the oldest entry goes, and that is counted.
"""

import hashlib
import json
import time
import uuid
from dataclasses import asdict, dataclass

from pipeline.broker import marks
from pipeline.broker.message import send_message
from pipeline.conf import CLASSES, queue_lists, sluice_settings
from pipeline.connections import class_redis, classes_by_redis, route, script
from pipeline.metrics import DEAD_LETTER_REASONS as REASONS
from pipeline.metrics import DEAD_LETTERS_DROPPED, DEAD_LETTERS_REPLAYED, dead_letter_field
from pipeline.redis import keys

__all__ = ["REASONS", "DeadLetter", "add", "discard", "entries", "replay", "size"]

ERROR_CHARS = 500
PAGE = 500
REPLAYED, FULL, GONE = 1, 0, -1


@dataclass(frozen=True)
class DeadLetter:
    """One message that could not be sent, and why."""

    id: str
    notification_id: str
    task: str
    klass: str
    kind: str
    reason: str
    error: str
    attempts: int
    at: float
    # The channels still to send, or None for every channel of the kind.
    channels: list | None
    kwargs: dict

    def as_json(self):
        return json.dumps(asdict(self), separators=(",", ":"), ensure_ascii=False)


def clean_error(error):
    """An error's text for an operator: its type and message, one line, no control characters, bounded."""
    text = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
    text = "".join(c if c.isprintable() else " " for c in text)
    return text[:ERROR_CHARS]


def add(task, klass, kwargs, reason, error, attempts, channels=None):
    """Keep a message that cannot be sent; return the DeadLetter. Raises RedisError when Redis is down, so
    the caller does not ack a message it could not keep."""
    notification_id = str(kwargs.get("notification_id", ""))
    scope = ",".join(sorted(channels)) if channels else "*"
    entry_id = hashlib.sha1(f"{notification_id}|{reason}|{scope}".encode()).hexdigest()[:20]
    letter = DeadLetter(
        id=entry_id,
        notification_id=notification_id,
        task=task,
        klass=klass,
        kind=str(kwargs.get("kind", "")),
        reason=reason,
        error=clean_error(error),
        attempts=attempts,
        at=time.time(),
        channels=sorted(channels) if channels else None,
        kwargs=kwargs,
    )
    home, kept = _home(klass, kwargs.get("user_id"))
    script("dead_letter", on=home)(
        keys=[keys.dead_letters(), keys.dead_letter_entries(), keys.counters()],
        args=[
            entry_id,
            letter.as_json(),
            letter.at,
            kept,
            dead_letter_field(klass, reason),
            DEAD_LETTERS_DROPPED,
        ],
    )
    return letter


def size(client=None):
    """How many dead letters are kept (on every class's Redis, or on ``client``'s)."""
    return sum(each.zcard(keys.dead_letters()) for each, _classes in classes_by_redis(client))


def _home(klass, user_id=None):
    """(the Redis a class's dead letters are kept on, how many it keeps): its class's (an unknown class:
    background's) and SLUICE_DEAD_LETTERS_MAX; on a Redis Cluster, the user's partition (where the user's messages
    are), which keeps its share of the bound."""
    conf = sluice_settings()
    klass = klass if klass in CLASSES else "background"
    queue = conf.queues[klass]
    kept = conf.dead_letters_max
    if queue.clustered:
        kept = max(1, -(-kept // queue.partitions))
    return class_redis(klass, user_id), kept


def entries(reason=None, kind=None, klass=None, older_than_s=None, ids=None, limit=None, client=None):
    """The dead letters that match every filter given, newest first, from every class's Redis (or ``client``)."""
    found = []
    for each, _classes in classes_by_redis(client):
        found += _entries_on(each, reason, kind, klass, older_than_s, ids, limit)
    found.sort(key=lambda letter: letter.at, reverse=True)
    return found[:limit] if limit is not None else found


def _entries_on(client, reason, kind, klass, older_than_s, ids, limit):
    before = time.time() - older_than_s if older_than_s is not None else "+inf"
    found = []
    start = 0
    while limit is None or len(found) < limit:
        page = client.zrevrangebyscore(keys.dead_letters(), before, "-inf", start=start, num=PAGE)
        if not page:
            break
        start += len(page)
        for raw in client.hmget(keys.dead_letter_entries(), page):
            if raw is None:
                continue  # dropped or replayed between the two reads
            letter = DeadLetter(**json.loads(raw))
            if _matches(letter, reason, kind, klass, ids):
                found.append(letter)
    return found[:limit] if limit is not None else found


def _matches(letter, reason, kind, klass, ids):
    return (
        (reason is None or letter.reason == reason)
        and (kind is None or letter.kind == kind)
        and (klass is None or letter.klass == klass)
        and (ids is None or letter.id in ids)
    )


def replay(letter):
    """Put ``letter`` back on its class's queue, for the channels it still has to send; REPLAYED, FULL or GONE.

    The message keeps its notification id (the provider's idempotency key) and starts its retries anew.
    The channels it failed on forget their send state, so the replay may send them; channels that
    went out before are not in the message.
    """
    conf = sluice_settings()
    # Its user's partition on a Redis Cluster, with that partition's share of the class's capacity.
    queue = route(letter.klass if letter.klass in conf.queues else "background", letter.kwargs.get("user_id")).queue
    kind = conf.kinds.get(letter.kind)
    channels = letter.channels or (list(kind.channels) if kind else [])
    kwargs = {**letter.kwargs, "channels": letter.channels} if letter.channels else dict(letter.kwargs)
    message = send_message(
        letter.klass if letter.klass in conf.queues else "background",
        uuid.uuid4().hex,
        json.dumps(kwargs, separators=(",", ":"), ensure_ascii=False),
        queue.name,
        letter.kind,
        kwargs.get("count", 1),
    )
    # Every live bucket: a replay may come at any time, and a "rejected" send left a mark.
    sent, fields = [], []
    for channel in channels:
        mark = marks.field(letter.notification_id, channel)
        buckets = marks.candidates(mark)
        sent += [keys.sent(letter.notification_id, channel), *buckets]
        fields += ["", *[mark] * len(buckets)]
    return script("replay_dead_letter", on=_home(letter.klass, letter.kwargs.get("user_id"))[0])(
        keys=[
            keys.dead_letters(),
            keys.dead_letter_entries(),
            keys.counters(),
            *sent,
            *queue_lists(queue.name),
        ],
        args=[letter.id, queue.capacity, message, DEAD_LETTERS_REPLAYED, len(sent), *fields],
    )


def discard(letters):
    """Forget these dead letters for good; return how many were still kept."""
    removed = 0
    homes = {}
    for letter in letters:
        home = _home(letter.klass, letter.kwargs.get("user_id"))[0]
        homes.setdefault(id(home), (home, []))[1].append(letter.id)
    for home, ids in homes.values():
        pipe = home.pipeline(transaction=True)
        pipe.zrem(keys.dead_letters(), *ids)
        pipe.hdel(keys.dead_letter_entries(), *ids)
        removed += pipe.execute()[0]
    return removed
