"""The activity log's entry, as its buffer on each class's Redis holds it (a stream): the one owner of its fields.

Admission's Lua (pipeline/lua/include/activity.lua) and the worker's end of a send (finish_send.lua) write an entry in
the step that decides it; Python writes the few decided elsewhere (``record``); the drain (notifications.activity)
reads them back with ``decode``. Fields go by name, short on the wire (an entry is about a hundred bytes), and only
the ones with a value are written. When an entry was made is its stream id's time: no field spends bytes on it.
"""

import logging
from typing import NamedTuple

from redis.exceptions import RedisError

from pipeline.redis import keys

logger = logging.getLogger("sluice.activity")

#: Each field's name in Python and on the wire.
FIELDS = {
    "user": "u",
    "kind": "k",
    "entity": "e",
    "notification": "n",
    "klass": "c",
    "outcome": "o",
    "reason": "r",
    "detail": "d",
    "fold": "f",
    "title": "t",
    "channel": "ch",
    "provider": "p",
}
_BY_WIRE = {wire: name for name, wire in FIELDS.items()}

#: A title is kept to explain a step, not to keep the message: this many characters at most.
TITLE_MAX = 120
#: An error or reason text kept with a step: this many characters at most.
DETAIL_MAX = 300

# What admission decided (include/activity.lua speaks the same names).
ACCEPTED, FOLDED, COLLAPSED, DEFERRED, SUPPRESSED = "accepted", "folded", "collapsed", "deferred", "suppressed"
THROTTLED, REJECTED, REPLAYED = "throttled", "rejected", "replayed"
# What a worker did with a send.
SENT, RETRIED, EXPIRED, DEAD_LETTERED, DIGESTED = "sent", "retried", "expired", "dead_lettered", "digested"
# What the host's database saw (written as rows, notifications.activity.record).
SCHEDULED, MOVED, CANCELLED = "scheduled", "moved", "cancelled"
DELIVERED, BOUNCED, COMPLAINED, OPENED = "delivered", "bounced", "complained", "opened"
INBOX_CREATED, INBOX_FOLDED, INBOX_READ, ESCALATED = "inbox_created", "inbox_folded", "inbox_read", "escalated"

#: A send's reason when providers failed it before the one that took it: this, then their names.
FAILOVER_PREFIX = "failover:"

DECISIONS = (ACCEPTED, FOLDED, COLLAPSED, DEFERRED, SUPPRESSED, THROTTLED, REJECTED, REPLAYED)
SENDS = (SENT, RETRIED, EXPIRED, DEAD_LETTERED, DIGESTED)
RECORDS = (
    SCHEDULED,
    MOVED,
    CANCELLED,
    DELIVERED,
    BOUNCED,
    COMPLAINED,
    OPENED,
    INBOX_CREATED,
    INBOX_FOLDED,
    INBOX_READ,
    ESCALATED,
)
OUTCOMES = DECISIONS + SENDS + RECORDS


class Entry(NamedTuple):
    """One step of one notification for one user."""

    user: str
    kind: str
    entity: str
    notification: str
    klass: str
    outcome: str
    reason: str = ""
    # What the step says beyond its reason: a hold's end (Unix seconds), a retry's error, a provider's message id,
    # a replayed key's first outcome, a rejection's retry_after.
    detail: str = ""
    # The fold key (pipeline.redis.keys.fold_member) an event went into, or a digest's keys.
    fold: str = ""
    title: str = ""
    channel: str = ""
    provider: str = ""


def encode(entry):
    """An Entry as XADD takes it: {wire name: text}, only the fields with a value."""
    return {
        FIELDS[name]: str(value) for name, value in zip(Entry._fields, entry, strict=True) if value not in ("", None)
    }


def decode(fields):
    """An Entry from a stream entry's fields (bytes or text, as redis-py gives them); unknown fields are ignored."""
    values = {}
    for wire, value in fields.items():
        name = _BY_WIRE.get(wire.decode() if isinstance(wire, bytes) else wire)
        if name:
            values[name] = value.decode() if isinstance(value, bytes) else value
    for name in ("user", "kind", "entity", "notification", "klass", "outcome"):
        values.setdefault(name, "")
    return Entry(**values)


def stream_time(stream_id):
    """When an entry was written (Unix seconds), from its stream id ("<ms>-<seq>")."""
    text = stream_id.decode() if isinstance(stream_id, bytes) else stream_id
    return int(text.split("-", 1)[0]) / 1000


def title_of(payload):
    """What of a payload an entry keeps: its "title" (or "subject"), cut to TITLE_MAX characters; "" for none."""
    if not isinstance(payload, dict):
        return ""
    title = payload.get("title") or payload.get("subject") or ""
    return title[:TITLE_MAX] if isinstance(title, str) else ""


def lua_constants(maxlen):
    """What activity.lua is handed in a kind's constants: the buffer's bound and the wire names."""
    return {"maxlen": maxlen, "f": FIELDS}


def add(client, entry, maxlen):
    """Queue one XADD of ``entry`` on ``client`` (a client or a pipeline), its stream capped near ``maxlen``."""
    return client.xadd(keys.activity(), encode(entry), maxlen=maxlen, approximate=True)


def record(client, entry):
    """Write ``entry`` on ``client`` (its class's Redis) when SLUICE_ACTIVITY is on; never raises: the log never fails
    what it records. For the steps decided in Python (a critical's rejection after its wait, a dead letter)."""
    from pipeline.conf import sluice_settings

    conf = sluice_settings().activity
    if not conf.enabled:
        return
    try:
        add(client, entry, conf.buffer_entries)
    except RedisError as exc:
        # The step itself stands; only its line in the log is missing (rare: the class's Redis just answered).
        logger.warning("activity: an entry (%s) was not recorded: %s", entry.outcome, type(exc).__name__)


# The drain's bookkeeping on each Redis (keys.activity_drained): the last stream id it stored, and how many in all.
DRAINED_LAST, DRAINED_COUNT = "last", "count"


def dropped(client):
    """How many entries the buffer on ``client`` trimmed before the drain stored them: added (XINFO STREAM's
    entries-added, Redis 7) - drained - still in the stream. None without a stream, or on a Redis before 7."""
    # One MULTI: a drain's batch (stored, counted and trimmed in one MULTI of its own) is on one side of it.
    pipe = client.pipeline(transaction=True)
    pipe.hget(keys.activity_drained(), DRAINED_COUNT)
    pipe.xinfo_stream(keys.activity())
    drained, info = pipe.execute(raise_on_error=False)
    if isinstance(info, Exception) or info.get("entries-added") is None:
        return None  # no stream yet, or a Redis before 7
    return max(0, int(info["entries-added"]) - int(drained or 0) - int(info["length"]))
