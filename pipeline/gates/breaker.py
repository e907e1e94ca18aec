"""Circuit breakers, one per (channel, provider), shared by every worker: state in Redis, moved in one atomic step.

closed: every call goes. It opens when, over a sliding window with at least ``min_calls`` calls, the share of
failed calls or of slow ones reaches its threshold, or after ``open_consecutive_failures`` failures in a row.
open: no call goes for ``min_open_s``. half-open: a round of ``half_open_probes`` calls goes; it closes if at most
``close_failure_ratio`` of them failed or were slow (lower than the opening threshold, so a provider failing at a
steady rate near it does not flap), and opens again otherwise, for twice as long (up to ``max_open_s``). Staff may
force a breaker open or closed.

The scripts take the time from the caller, so tests drive a breaker with a clock they control; workers pass wall
time, and the window's buckets (a tenth of the window each) absorb the small skew between their clocks.
"""

import logging
import time
import uuid
from dataclasses import dataclass

from redis.exceptions import RedisError

from pipeline.conf import sluice_settings
from pipeline.connections import script, shared_redis
from pipeline.metrics import PROVIDER_STATES, provider_call_field, provider_transition_prefix
from pipeline.redis import keys

logger = logging.getLogger("sluice.breaker")

#: The clock of every breaker decision, in seconds; tests replace it with one they control.
clock = time.time
BUCKETS = 10
# A probe's lease: longer than any send may take (the largest send budget is 120 s).
PROBE_LEASE_MS = 150_000
FORCINGS = ("open", "closed")


@dataclass(frozen=True)
class Permit:
    """The breaker's answer to one call: may it go, in which state, the probe's lease (else ""), and for an open
    breaker how many seconds until it lets probes through (None: forced open, or not open)."""

    allowed: bool
    state: str
    lease: str = ""
    probes_in_s: float | None = None


ALWAYS = Permit(True, "closed")


def _now_ms(now):
    return int((clock() if now is None else now) * 1000)


def allow(channel, provider, breaker, now=None):
    """May one call go to ``provider`` now? ``breaker`` is its BreakerConfig (None: it never opens)."""
    if breaker is None:
        return ALWAYS
    lease = uuid.uuid4().hex
    allowed, state, wait_ms = script("breaker_allow", on=shared_redis())(
        keys=[keys.breaker(channel, provider), keys.breaker_probes(channel, provider), keys.counters()],
        args=[
            _now_ms(now),
            breaker.half_open_probes,
            PROBE_LEASE_MS,
            lease,
            provider_transition_prefix(channel, provider),
            provider_call_field(channel, provider, "skipped"),
        ],
    )
    state = state.decode()
    return Permit(
        bool(allowed),
        state,
        lease if state == "probe" else "",
        wait_ms / 1000 if wait_ms >= 0 and not allowed else None,
    )


def record(channel, provider, breaker, outcome, seconds, permit=ALWAYS, now=None):
    """Report one call: ``outcome`` is "accepted", "rejected" (the provider refused the message itself: it works)
    or "failed". Returns the breaker's state after it, or None when Redis could not be told: a result that
    cannot be recorded must never fail a send that went out."""
    try:
        if breaker is None:
            shared_redis().hincrby(keys.counters(), provider_call_field(channel, provider, outcome), 1)
            return "closed"
        window_ms = breaker.window_s * 1000
        state = script("breaker_record", on=shared_redis())(
            keys=[keys.breaker(channel, provider), keys.breaker_probes(channel, provider), keys.counters()],
            args=[
                _now_ms(now),
                "fail" if outcome == "failed" else "ok",
                "1" if seconds >= breaker.slow_call_s else "0",
                permit.lease,
                max(1, window_ms // BUCKETS),
                BUCKETS,
                breaker.min_calls,
                breaker.open_failure_ratio,
                breaker.open_slow_ratio,
                breaker.half_open_probes,
                breaker.close_failure_ratio,
                breaker.min_open_s * 1000,
                breaker.max_open_s * 1000,
                provider_transition_prefix(channel, provider),
                provider_call_field(channel, provider, outcome),
                breaker.open_consecutive_failures,
            ],
        )
    except RedisError as exc:
        logger.warning("breaker %s/%s: the call's %s was not recorded: %s", channel, provider, outcome, exc)
        return None
    return state.decode()


def force(channel, provider, forcing):
    """Force the breaker "open" or "closed", or None to hand it back to its rules (restarting closed)."""
    if forcing is not None and forcing not in FORCINGS:
        raise ValueError(f"a breaker is forced 'open' or 'closed', not {forcing!r}")
    return script("breaker_force", on=shared_redis())(
        keys=[keys.breaker(channel, provider), keys.breaker_probes(channel, provider), keys.counters()],
        args=[forcing or "", provider_transition_prefix(channel, provider)],
    ).decode()


@dataclass(frozen=True)
class ProviderState:
    """One provider's breaker as the admin and the exporter show it."""

    channel: str
    provider: str
    position: int
    state: str
    forced: str
    calls: int
    failed: int
    slow: int
    # When an open breaker lets its next probes through (seconds since the epoch), else None.
    open_until: float | None
    has_breaker: bool

    @property
    def state_value(self):
        """sluice_provider_state: 0 closed, 1 half-open, 2 open."""
        return PROVIDER_STATES.index(self.state)


def states(client=None, now=None):
    """Every configured provider's breaker, in channel order and then in order of preference."""
    client = client or shared_redis()
    now_ms = _now_ms(now)
    listed = [
        (channel.name, position, provider)
        for channel in sluice_settings().channels.values()
        for position, provider in enumerate(channel.providers)
    ]
    pipe = client.pipeline(transaction=False)
    for channel, _position, provider in listed:
        pipe.hgetall(keys.breaker(channel, provider.name))
    found = []
    for (channel, position, provider), raw in zip(listed, pipe.execute(), strict=True):
        found.append(_state(channel, position, provider, {k.decode(): v.decode() for k, v in raw.items()}, now_ms))
    return found


def _state(channel, position, provider, fields, now_ms):
    breaker = provider.breaker
    forced = fields.get("forced", "")
    state = forced or fields.get("state", "closed")
    totals = {"c": 0, "f": 0, "s": 0}
    if breaker is not None:
        width = max(1, breaker.window_s * 1000 // BUCKETS)
        first = now_ms // width - BUCKETS + 1
        for name, value in fields.items():
            which, _, bucket = name.partition(":")
            if which in totals and bucket.lstrip("-").isdigit() and int(bucket) >= first:
                totals[which] += int(value)
    open_until = None
    if state == "open" and not forced and "opened_at" in fields:
        open_until = (int(fields["opened_at"]) + int(fields.get("open_ms", 0))) / 1000
    return ProviderState(
        channel=channel,
        provider=provider.name,
        position=position,
        state=state,
        forced=forced,
        calls=totals["c"],
        failed=totals["f"],
        slow=totals["s"],
        open_until=open_until,
        has_breaker=breaker is not None,
    )
