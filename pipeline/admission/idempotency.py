"""An idempotency key recorded with no event behind it (record_key.lua): ingest's answer for an unknown user."""

from pipeline import durability
from pipeline.admission.scripts import script
from pipeline.connections import route
from pipeline.metrics import idempotent_replay_field
from pipeline.redis import keys


def record_key(klass, idempotency, outcome, ttl_s, user_id=None):
    """Record ``outcome`` (an outcome's name) at ``idempotency`` (a key name, pipeline.redis.keys.idempotency, or
    None) on ``klass``'s Redis for ``ttl_s`` seconds, as an admission of that class would, publishing nothing; return
    the outcome the key held already (a replay, counted as one), or None. One round trip, key or not, WAITed for like
    an admission in a replicated class (NotReplicated, WaitRefused). On a Redis Cluster, in ``user_id``'s partition,
    where that user's admissions record their keys."""
    target = route(klass, user_id)
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


def record_keys(klass, idempotencies, outcome, ttl_s):
    """record_key() for many keys of one class in one round trip; return what each held already (None: recorded)."""
    if not idempotencies:
        return []
    target = route(klass)
    found = durability.run_many(
        script.get("record_key"),
        [([keys.counters(), key], [outcome, ttl_s, idempotent_replay_field(klass)]) for key in idempotencies],
        client=target.client,
        queue=target.queue,
        klass=klass,
        step="admission",
    )
    return [each.decode() if isinstance(each, bytes) else each for each in found]


def forget_key(klass, *idempotencies):
    """Drop keys recorded for calls that then failed, so that their retries are decided afresh (best effort)."""
    from redis.exceptions import RedisError

    if not idempotencies:
        return
    try:
        route(klass).client.delete(*idempotencies)
    except RedisError:
        pass  # the key's own expiry ends it; a retry within it is told the recorded outcome
