"""The folding store in Redis: claim pending folds for a flush, publish or give them back, recover dead claims."""

import hashlib
import json
import time
from dataclasses import dataclass
from pathlib import Path

from pipeline import keys
from pipeline.store import Scripts, get_redis

#: The fold store's own Lua, in digest/lua.
script = Scripts(Path(__file__).with_name("lua"))

FOLDED, FOLDED_FLUSH, DEFERRED, OVERFLOW_FULL = 1, 2, 3, 0
SIZE_TRIGGER_TTL_S = 5


def fold(klass, user_id, kind, entity_id, payload_json, message, overflow_capacity, max_keys, opt_out=True, now=None):
    """Fold one event into user|kind|entity, or (opted-out user) park ``message`` in the overflow.

    Returns FOLDED; FOLDED_FLUSH when the caller must enqueue a size-triggered flush; DEFERRED;
    or OVERFLOW_FULL when the user opted out and the overflow has no room either.
    """
    member = keys.fold_member(user_id, kind, entity_id)
    members = (str(user_id), f"{user_id}|{kind}") if opt_out else ("", "")
    code, _pending = script("fold")(
        keys=[
            keys.pending(),
            keys.fold(member),
            keys.counters(),
            keys.optout(),
            keys.overflow(klass),
            keys.size_trigger(),
        ],
        args=[
            time.time() if now is None else now,
            payload_json,
            member,
            *members,
            message,
            overflow_capacity,
            max_keys,
            SIZE_TRIGGER_TTL_S,
            f"notifications:{klass}:",
            "folded" if klass == "routine" else "collapsed",
        ],
    )
    return code


@dataclass(frozen=True)
class Fold:
    """One user|kind|entity's folded events, as a flush claimed them."""

    member: str
    user_id: str
    kind: str
    entity_id: str
    count: int
    payload_json: str
    first_seen: float
    last_seen: float

    def notification_id(self, flush_id):
        """Stable across redeliveries and recoveries of this flush, so a send is deduplicated by it."""
        return f"digest-{flush_id}-{hashlib.sha1(self.member.encode()).hexdigest()[:16]}"


def claim(flush_id, limit, lease_s):
    """Claim up to ``limit`` pending folds (oldest first) for ``flush_id``; return their members."""
    members = script("claim")(
        keys=[keys.pending(), keys.claims(), keys.claim_set(flush_id)],
        args=[keys.DIGEST_PREFIX, flush_id, time.time() + lease_s, limit],
    )
    return [m.decode() for m in members]


def claimed_members(flush_id):
    """Members a flush still holds (for taking over a dead flusher's claim)."""
    return sorted(m.decode() for m in get_redis().smembers(keys.claim_set(flush_id)))


def read_claimed(flush_id, members):
    """The Folds a flush holds, read in one round trip; members already published are left out."""
    pipe = get_redis().pipeline(transaction=False)
    for member in members:
        pipe.hmget(keys.claimed(flush_id, member), "n", "p", "f", "l")
    folds = []
    for member, (n, p, f, last) in zip(members, pipe.execute(), strict=True):
        if n is None:
            continue
        user_id, kind, entity_id = json.loads(member)
        folds.append(Fold(member, user_id, kind, entity_id, int(n), p.decode(), float(f), float(last)))
    return folds


def publish_claimed(flush_id, fold, queue, message, counter_field):
    """Push ``fold``'s digest message and release its claim atomically; 1 sent, 0 queue full, -1 done already."""
    return script("publish_claimed")(
        keys=[
            keys.claimed(flush_id, fold.member),
            keys.claim_set(flush_id),
            keys.counters(),
            *keys.priority_lists(queue.name),
        ],
        args=[queue.capacity, fold.member, message, counter_field],
    )


def unclaim(flush_id, member):
    """Give a claimed fold back to pending, merged with any fold of the same key that arrived since."""
    return script("unclaim")(
        keys=[keys.claimed(flush_id, member), keys.fold(member), keys.pending(), keys.claim_set(flush_id)],
        args=[member],
    )


def release(flush_id):
    """Forget a flush whose claim set is empty."""
    client = get_redis()
    if client.scard(keys.claim_set(flush_id)) == 0:
        client.zrem(keys.claims(), flush_id)


def expired_claims(now=None):
    """Flush ids whose lease ran out: their flusher died or stalled, and another may finish them."""
    raw = get_redis().zrangebyscore(keys.claims(), "-inf", now or time.time())
    return [f.decode() for f in raw]


def renew(flush_id, lease_s):
    """Extend a claim's lease (taking it over, when it had expired)."""
    get_redis().zadd(keys.claims(), {flush_id: time.time() + lease_s}, xx=True)


def state():
    """What the admin shows: pending keys, the oldest pending fold, the last flush's time and size."""
    client = get_redis()
    pipe = client.pipeline(transaction=False)
    pipe.zcard(keys.pending())
    pipe.zrange(keys.pending(), 0, 0, withscores=True)
    pipe.hgetall(keys.digest_stats())
    pipe.zcard(keys.claims())
    pending, oldest, stats, claims = pipe.execute()
    return {
        "pending_keys": pending,
        "oldest_pending_at": oldest[0][1] if oldest else None,
        "last_flush_at": float(stats[b"last_flush_at"]) if b"last_flush_at" in stats else None,
        "last_flush_size": int(stats[b"last_flush_size"]) if b"last_flush_size" in stats else None,
        "claims_in_flight": claims,
    }
