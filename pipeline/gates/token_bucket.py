"""Token buckets in Redis, spent atomically by lua/token_bucket.lua: ingest spends one per service token, the
preferences API one per user."""

from pipeline.connections import script


def take_from(key, rate_per_second, burst, cost=1):
    """Spend ``cost`` requests of the bucket at ``key`` (refilled at ``rate_per_second``, holding at most ``burst``):
    return 0.0 when allowed, else the seconds until there are enough."""
    allowed, wait_ms = script("token_bucket")(keys=[key], args=[rate_per_second, burst, cost])
    return 0.0 if allowed else int(wait_ms) / 1000


def charge(key, rate_per_second, burst, cost):
    """Spend ``cost`` requests of the bucket at ``key`` whatever it holds, leaving it in debt if need be: the next
    requests wait until it has refilled (a fan-out's users, once its request was allowed)."""
    if cost > 0:
        script("token_bucket")(keys=[key], args=[rate_per_second, burst, cost, 0])
