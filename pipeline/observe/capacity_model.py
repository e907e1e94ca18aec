"""Capacity from Little's law and queueing basics: is each pool keeping up, and how many workers it needs."""

import math
from dataclasses import asdict, dataclass

AT_RISK_RHO = 0.85


@dataclass(frozen=True)
class Assessment:
    """One queue's load against its pool, and the verdict."""

    queue: str
    arrival_per_s: float  # λ
    mu_per_worker: float | None  # μ, messages a second one worker slot finishes
    workers: int  # n
    channel_limit_per_s: float | None  # the tightest shared-channel rate the class sends through
    service_per_s: float | None  # μ_total = min(n·μ, channel limit)
    rho: float | None  # λ / μ_total
    n_min: float | None  # λ / μ
    n_safe: int | None  # ceil(n_min / ρ_target)
    depth: int
    drain_time_s: float | None  # depth / (μ_total − λ) while it drains, else None
    # Messages the pool falls behind by over the window, max(0, λ − μ_total) × window: 0 while it keeps up.
    backlog_debt: float
    verdict: str

    def as_dict(self):
        return asdict(self)


def assess(queue, arrival, mu, workers, depth, window_s, target_rho=0.7, channel_limit=None):
    """Assess one queue from its measured arrival rate, per-worker service rate and worker count."""
    if not mu:
        verdict = "no measured sends yet: cannot tell"
        return Assessment(queue, arrival, mu, workers, channel_limit, None, None, None, None, depth, None, 0.0, verdict)
    service = workers * mu
    if channel_limit is not None:
        service = min(service, channel_limit)
    rho = arrival / service if service else math.inf
    n_min = arrival / mu
    n_safe = math.ceil(n_min / target_rho) if arrival else 0
    drain = depth / (service - arrival) if service > arrival else None
    debt = max(0.0, (arrival - service) * window_s)
    if rho >= 1:
        if channel_limit is not None and channel_limit < arrival:
            verdict = f"will not catch up: the channel's limit ({channel_limit:g}/s) is below arrivals, not the workers"
        else:
            verdict = f"will not catch up: needs >= {math.ceil(n_min) if n_min > workers else workers + 1} workers"
    elif rho >= AT_RISK_RHO:
        verdict = f"at risk (rho >= {AT_RISK_RHO}): {n_safe} workers for rho {target_rho}"
    else:
        verdict = "stable"
    return Assessment(
        queue, arrival, mu, workers, channel_limit, service, rho, n_min, n_safe, depth, drain, debt, verdict
    )


def rates_from_samples(samples):
    """λ (admitted/s) and μ per worker slot (1 / mean seconds of sending per message) from window samples."""
    if len(samples) < 2:
        return 0.0, None
    first, last = samples[0], samples[-1]
    span = last["t"] - first["t"]
    arrival = (last.get("arrived", 0) - first.get("arrived", 0)) / span if span > 0 else 0.0
    done = last["done"] - first["done"]
    busy = last.get("send_s", 0) - first.get("send_s", 0)
    mu = done / busy if busy > 0 and done > 0 else None
    return arrival, mu
