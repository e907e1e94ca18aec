"""The channel priority gate: every send on a rate- or concurrency-limited channel asks Redis first.

Critical takes tokens first. While a critical send waits on a channel, and for a hold window after
the last one, routine and background wait before each of their sends (routine keeps a minimum
share). A waiting sender holds no token and sleeps as long as the gate says, never spinning.
"""

import time
import uuid
from contextlib import contextmanager

from . import keys
from .conf import sluice_settings
from .store import script, shared_redis

# Longer than any send; a worker that dies holding a concurrency slot frees it after this.
LEASE_TTL_MS = 120_000
# Critical waits as long as it takes (well within the send claim's TTL); lower classes wait the
# channel's max_wait_ms, then give their worker back.
CRITICAL_MAX_WAIT_S = 60
PARTITION_MAX = 100


class GateTimeout(Exception):
    """The channel had no room for this send in time; the send task puts its message back at the end of its
    queue (a transient condition, like a provider's rate limit)."""


def partition_of(gate, payload):
    """The partition a send belongs to: the payload's ``partition_by`` field, or the whole channel."""
    if not gate.partition_by or not isinstance(payload, dict):
        return ""
    return str(payload.get(gate.partition_by, ""))[:PARTITION_MAX]


@contextmanager
def slot(channel, klass, payload=None, max_wait_s=None):
    """Hold the right to send once on ``channel`` for the body of the ``with`` block."""
    gate = sluice_settings().channels[channel].gate
    if gate is None or not sluice_settings().gate_enabled:
        yield
        return
    if max_wait_s is None:
        max_wait_s = CRITICAL_MAX_WAIT_S if klass == "critical" else gate.max_wait_ms / 1000
    # A partition has its own limits (by default the channel's), and the channel's limits hold for all of its
    # partitions together: a provider's account limit cannot be escaped by inventing partition values.
    partitioned = bool(gate.partition_by)
    rate = (gate.partition_rate_per_s if partitioned else None) or gate.rate_per_s or 0
    burst = (gate.partition_burst if partitioned else None) or gate.burst
    concurrency = (gate.partition_concurrency if partitioned else None) or gate.concurrency or 0
    gate_keys = keys.gate(channel, partition_of(gate, payload))
    lease = uuid.uuid4().hex
    args = [klass, rate, burst, concurrency, gate.hold_ms, gate.routine_min_share, lease, LEASE_TTL_MS]
    held = [gate_keys[2]] if concurrency else []
    if partitioned:
        whole = keys.gate_channel(channel)
        gate_keys += whole
        args += [gate.rate_per_s or 0, gate.burst, gate.concurrency or 0]
        if gate.concurrency:
            held.append(whole[2])
    deadline = time.monotonic() + max_wait_s
    while wait_ms := script("gate_acquire", on=shared_redis())(keys=gate_keys, args=args):
        if time.monotonic() + wait_ms / 1000 > deadline:
            raise GateTimeout(f"channel {channel!r} had no room for a {klass} send within {max_wait_s} s")
        time.sleep(wait_ms / 1000)
    try:
        yield
    finally:
        if held:
            pipe = shared_redis().pipeline(transaction=False)
            for key in held:
                pipe.zrem(key, lease)
            pipe.execute()
