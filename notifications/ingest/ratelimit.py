"""The ingest API's rate limit: one token bucket per service token (pipeline.gates.token_bucket)."""

from pipeline.gates.token_bucket import charge, take_from
from pipeline.redis import keys


def take(token):
    """Spend one request of ``token``'s bucket: return 0.0 when allowed, else the seconds until one is back."""
    return take_from(keys.ingest_rate(token.pk), token.rate_per_second, token.burst)


def charge_users(token, users):
    """Charge ``token``'s bucket a request for each of a fan-out's users beyond the one its request took: always
    allowed, the bucket left in debt, so the token's rate counts users, not requests."""
    charge(keys.ingest_rate(token.pk), token.rate_per_second, token.burst, users - 1)
