"""Rate limits as token buckets in Redis, spent atomically by lua/ratelimit_token.lua: per ingest token, and for
any other key (a user's preference changes)."""

from pathlib import Path

from pipeline import keys
from pipeline.store import Scripts

script = Scripts(Path(__file__).with_name("lua"))


def take(token):
    """Spend one request of ``token``'s bucket: return 0.0 when allowed, else the seconds until one is back."""
    return take_from(keys.ingest_rate(token.pk), token.rate_per_second, token.burst)


def take_from(key, rate_per_second, burst):
    """Spend one request of the bucket at ``key`` (refilled at ``rate_per_second``, holding at most ``burst``):
    return 0.0 when allowed, else the seconds until one is back."""
    allowed, wait_ms = script("ratelimit_token")(keys=[key], args=[rate_per_second, burst])
    return 0.0 if allowed else int(wait_ms) / 1000
