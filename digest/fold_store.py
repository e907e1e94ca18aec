"""The folding store in Redis: read the folds a flush claimed, give them back, recover dead claims, and its state.

Admission folds events into it (pipeline.admission); the flush claims whole users' folds and publishes them
(digest.user_claims); this module reads and ends the folds. Every function takes the store's Redis: with a Redis per
class, there is no default store to fall back on.
"""

import hashlib
import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path

from pipeline.admission.fold_fields import FOLD, SIZE
from pipeline.connections import Scripts, get_redis
from pipeline.redis import keys

logger = logging.getLogger("sluice.digest")


#: The fold store's own Lua, in digest/lua.
script = Scripts(Path(__file__).with_name("lua"))

GRAINS = ("entity", "kind", "user")


@dataclass(frozen=True)
class Fold:
    """One fold's events (of a user|kind|entity, a user|kind, or a user's class), as a flush claimed them."""

    member: str
    user_id: str
    kind: str  # the latest event's kind
    entity_id: str | None  # None for the coarser grains
    count: int
    payload_json: str
    first_seen: float
    last_seen: float
    grain: str = "entity"
    channels: tuple = ()  # the channels its events asked for
    entities: int = 1  # distinct entities (counted up to 100; more reads 101)
    kinds: int = 1  # distinct kinds (the user grain)

    def notification_id(self, flush_id):
        """Stable across redeliveries and recoveries of this flush, so a send is deduplicated by it."""
        return f"digest-{flush_id}-{hashlib.sha1(self.member.encode()).hexdigest()[:16]}"


def claimed_members(flush_id, client):
    """Members a flush still holds (for taking over a dead flusher's claim)."""
    return sorted(m.decode() for m in client.smembers(keys.claim_set(flush_id)))


def read_claimed(flush_id, claimed, client):
    """The Folds a flush holds, read in one round trip; members already published are left out."""
    pipe = client.pipeline(transaction=False)
    for member in claimed:
        pipe.hgetall(keys.claimed(flush_id, member))
    folds = []
    for member, fields in zip(claimed, pipe.execute(), strict=True):
        if fields:
            folds.append(fold_from(member, fields))
    return folds


def fold_from(member, fields):
    """The Fold of ``member`` from its hash's raw fields (HGETALL)."""
    fields = {k.decode(): v.decode() for k, v in fields.items()}
    channel = FOLD["channel"]
    user_id, kind, entity_id = json.loads(member)
    grain = GRAINS[0] if entity_id is not None and kind is not None else GRAINS[1] if kind else GRAINS[2]
    return Fold(
        member=member,
        user_id=user_id,
        kind=fields.get(FOLD["kind"]) or kind,
        entity_id=entity_id if grain == "entity" else None,
        count=int(fields[FOLD["count"]]),
        payload_json=fields[FOLD["payload"]],
        first_seen=float(fields[FOLD["first_seen"]]),
        last_seen=float(fields[FOLD["last_seen"]]),
        grain=grain,
        channels=tuple(sorted(k[len(channel) :] for k in fields if k.startswith(channel))),
        entities=int(fields.get(FOLD["entities"], 1)),
        kinds=int(fields.get(FOLD["kinds"], 1)),
    )


# The handover marks outlive any claim a takeover could still find: a flusher's crash leaves at most one batch of
# them, and a release deletes them.
HANDOVER_TTL_S = 86400


def unclaim(flush_id, member, client):
    """Give a claimed fold back to pending, merged with any fold of the same key that arrived since."""
    return script("unclaim", on=client)(
        keys=[
            keys.claimed(flush_id, member),
            keys.fold(member),
            keys.pending(),
            keys.claim_set(flush_id),
            keys.fold_store_size(),
        ],
        args=[member, time.time()],
    )


def release(flush_id, client, handed_to=()):
    """Forget a flush whose claim set is empty, and its handover marks on the Redis clients ``handed_to``: with
    every fold published or given back, no takeover will look for them."""
    if client.scard(keys.claim_set(flush_id)) == 0:
        client.zrem(keys.claims(), flush_id)
        for target in handed_to:
            target.delete(keys.handover(flush_id))


def expired_claims(client, now=None):
    """Flush ids whose lease ran out: their flusher died or stalled, and another may finish them."""
    raw = client.zrangebyscore(keys.claims(), "-inf", now or time.time())
    return [f.decode() for f in raw]


def renew(flush_id, lease_s, client):
    """Extend a claim's lease (taking it over, when it had expired)."""
    client.zadd(keys.claims(), {flush_id: time.time() + lease_s}, xx=True)


HELD_SAMPLE = 1000


def state(client, now=None):
    """What the admin shows for one fold store (on ``client``): pending keys (due now, and held for later
    by reason, from the next 1,000 held), the next due time, the store's size, the last flush's time and size."""
    now = time.time() if now is None else now
    pipe = client.pipeline(transaction=False)
    pipe.zcard(keys.pending())
    pipe.zcount(keys.pending(), "-inf", now)
    pipe.zrangebyscore(keys.pending(), f"({now}", "+inf", start=0, num=HELD_SAMPLE, withscores=True)
    pipe.hgetall(keys.digest_stats())
    pipe.zcard(keys.claims())
    pipe.hmget(keys.fold_store_size(), SIZE["keys"], SIZE["bytes"])
    pending, due, held, stats, claims, (size_k, size_b) = pipe.execute()
    reasons = {}
    if held:
        pipe = client.pipeline(transaction=False)
        for member, _due in held:
            pipe.hget(keys.fold(member.decode()), FOLD["reason"])
        for reason in pipe.execute():
            name = reason.decode() if reason else "unknown"
            reasons[name] = reasons.get(name, 0) + 1
    return {
        "pending_keys": pending,
        "due_keys": due,
        "held_keys": pending - due,
        "held_by_reason": dict(sorted(reasons.items())),
        "next_due_at": held[0][1] if held else None,
        "store_keys": int(size_k or 0),
        "store_bytes": int(size_b or 0),
        "last_flush_at": float(stats[b"last_flush_at"]) if b"last_flush_at" in stats else None,
        "last_flush_size": int(stats[b"last_flush_size"]) if b"last_flush_size" in stats else None,
        "claims_in_flight": claims,
    }


def every_state(now=None):
    """state() over every fold store (each Redis routine or background folds on), added up: counts summed, the
    fullest store's size (each has the whole bound), the soonest next due, the store flushed longest ago."""
    from pipeline.connections import fold_store_classes

    states = [state(get_redis(url), now) for url in fold_store_classes()]
    if len(states) == 1:
        return states[0]
    reasons = {}
    for each in states:
        for name, count in each["held_by_reason"].items():
            reasons[name] = reasons.get(name, 0) + count
    due = [s["next_due_at"] for s in states if s["next_due_at"] is not None]
    flushed = [s["last_flush_at"] for s in states]
    sizes = [s["last_flush_size"] for s in states if s["last_flush_size"] is not None]
    return {
        **{
            name: sum(s[name] for s in states) for name in ("pending_keys", "due_keys", "held_keys", "claims_in_flight")
        },
        "held_by_reason": dict(sorted(reasons.items())),
        "next_due_at": min(due) if due else None,
        "store_keys": max(s["store_keys"] for s in states),
        "store_bytes": max(s["store_bytes"] for s in states),
        "last_flush_at": None if None in flushed else min(flushed),
        "last_flush_size": sum(sizes) if sizes else None,
    }
