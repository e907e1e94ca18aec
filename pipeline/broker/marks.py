"""Where "sent" marks live: one small hash per time bucket and shard, expired whole once no redelivery needs it."""

import math
import time
import zlib

from pipeline.broker import reaper
from pipeline.conf import transport_options
from pipeline.redis import keys

#: Width of a time bucket. A mark lives between lifetime_s() and lifetime_s() + BUCKET_S after its send.
BUCKET_S = 60
#: Hashes per bucket. Each stays under Redis's hash-max-listpack-entries (128) up to SHARDS × 128 / BUCKET_S
#: (about 2,200) sends a second, so a mark costs a listpack entry (tens of bytes), not a key (about 180).
SHARDS = 1024
#: How far two hosts' clocks may disagree: a claim also looks at the buckets this much around its own time.
CLOCK_SKEW_S = 5
#: How long a message handed back to its queue may wait there before a worker takes it again, or a retry
#: (whose countdown is at most the claim's 120 s) waits for its turn: about eight times the 37 s drain time a
#: queue's capacity is sized for.
QUEUE_ALLOWANCE_S = 300
# kombu's defaults: the unacked sweep runs every interval × throttle seconds in a worker's event loop.
RESTORE_INTERVAL_S, RESTORE_THROTTLE = 10, 10
#: The longest a mark is kept, whatever the settings say: the marks' memory is sends a second × lifetime × about
#: 47 bytes, so the lifetime is bounded too. Settings whose redelivery bound passes it fail `check` (sluice.E007).
MAX_LIFETIME_S = 3600


def redelivery_bound_s():
    """The longest a message fetched before its send can take to come back and reach a worker, from the settings
    that make it: the visibility timeout plus one unacked sweep (a live worker that could not ack), or the
    reaper's bound (a dead worker: pipeline.broker.reaper.bound_s) when longer, plus the time back in the queue."""
    terms = bound_terms()
    return math.ceil(max(terms["visibility_timeout"] + terms["unacked_sweep"], terms["reaper"]) + QUEUE_ALLOWANCE_S)


def bound_terms():
    """The parts of the redelivery bound, in seconds, by what sets them (sluice.E007 names them)."""
    options = transport_options()
    sweep = float(options.get("unacked_restore_interval", RESTORE_INTERVAL_S)) * float(
        options.get("unacked_restore_throttle", RESTORE_THROTTLE)
    )
    return {
        "visibility_timeout": float(options.get("visibility_timeout", 3600)),
        "unacked_sweep": sweep,
        "reaper": reaper.bound_s(float(options.get("fetch_dead_after_s", 60))),
    }


def lifetime_s():
    """How long a "sent" mark lives: the redelivery bound, at most MAX_LIFETIME_S (sluice.E007 fails beyond it)."""
    return min(redelivery_bound_s(), MAX_LIFETIME_S)


def field(notification_id, channel):
    """The mark's field in its bucket's hash."""
    return f"{notification_id}:{channel}"


def _key(bucket, name):
    return keys.sent_marks(bucket, zlib.crc32(name.encode()) % SHARDS)


def write_target(name, now=None):
    """(hash key, expiry as Unix seconds) for a mark written now: the bucket of now, expired whole
    lifetime_s() after the bucket ends."""
    now = time.time() if now is None else now
    bucket = int(now // BUCKET_S)
    return _key(bucket, name), (bucket + 1) * BUCKET_S + lifetime_s()


def candidates(name, since=None, now=None):
    """The hashes that may hold this mark: every live bucket, or only those from ``since`` (the message's first
    publish time: its mark cannot be older) when given. Newest first, where a redelivery finds its mark."""
    now = time.time() if now is None else now
    # A bucket lives until lifetime_s() after its end (by the writer's clock, which may run CLOCK_SKEW_S ahead).
    oldest = now - lifetime_s() - CLOCK_SKEW_S
    if since is not None:
        # Never later than now: a publisher whose clock runs ahead must not hide the buckets written meanwhile.
        oldest = max(oldest, min(float(since), now) - CLOCK_SKEW_S)
    first, last = int(oldest // BUCKET_S), int((now + CLOCK_SKEW_S) // BUCKET_S)
    return [_key(bucket, name) for bucket in range(last, first - 1, -1)]
