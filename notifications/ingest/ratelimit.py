"""The ingest API's rate limit: one token bucket per service token (pipeline.token_bucket)."""

from pipeline.redis import keys
from pipeline.token_bucket import take_from


def take(token):
    """Spend one request of ``token``'s bucket: return 0.0 when allowed, else the seconds until one is back."""
    return take_from(keys.ingest_rate(token.pk), token.rate_per_second, token.burst)
