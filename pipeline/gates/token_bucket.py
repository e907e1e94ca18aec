"""Token buckets in Redis, spent atomically by lua/token_bucket.lua: ingest spends one per service token, the
preferences API one per user."""

from pipeline.connections import script


def take_from(key, rate_per_second, burst):
    """Spend one request of the bucket at ``key`` (refilled at ``rate_per_second``, holding at most ``burst``):
    return 0.0 when allowed, else the seconds until one is back."""
    allowed, wait_ms = script("token_bucket")(keys=[key], args=[rate_per_second, burst])
    return 0.0 if allowed else int(wait_ms) / 1000
