"""An idempotency key recorded with no event behind it (record_key.lua): ingest's answer for an unknown user."""

from pipeline import durability
from pipeline.admission.scripts import script
from pipeline.connections import route
from pipeline.metrics import idempotent_replay_field
from pipeline.redis import keys


def record_key(klass, idempotency, outcome, ttl_s):
    """Record ``outcome`` (an outcome's name) at ``idempotency`` (a key name, pipeline.redis.keys.idempotency, or
    None) on ``klass``'s Redis for ``ttl_s`` seconds, as an admission of that class would, publishing nothing; return
    the outcome the key held already (a replay, counted as one), or None. One round trip, key or not, WAITed for like
    an admission in a replicated class (NotReplicated, WaitRefused)."""
    target = route(klass)
    found = durability.run(
        script.get("record_key"),
        keys=[keys.counters(), idempotency or keys.NO_IDEMPOTENCY],
        args=[outcome, ttl_s if idempotency else 0, idempotent_replay_field(klass)],
        client=target.client,
        queue=target.queue,
        klass=klass,
        step="admission",
    )
    return found.decode() if isinstance(found, bytes) else found


def forget_key(klass, idempotency):
    """Drop a key recorded for a call that then failed, so that its retry is decided afresh (best effort)."""
    from redis.exceptions import RedisError

    try:
        route(klass).client.delete(idempotency)
    except RedisError:
        pass  # the key's own expiry ends it; a retry within it is told the recorded outcome
