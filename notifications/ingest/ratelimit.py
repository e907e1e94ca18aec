"""The per-token rate limit: a token bucket in Redis, spent atomically by lua/ratelimit_token.lua."""

from pathlib import Path

from pipeline import keys
from pipeline.store import Scripts

script = Scripts(Path(__file__).with_name("lua"))


def take(token):
    """Spend one request of ``token``'s bucket: return 0.0 when allowed, else the seconds until one is back."""
    allowed, wait_ms = script("ratelimit_token")(
        keys=[keys.ingest_rate(token.pk)], args=[token.rate_per_second, token.burst]
    )
    return 0.0 if allowed else int(wait_ms) / 1000
