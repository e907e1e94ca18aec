"""The channel priority gate: every send on a rate- or concurrency-limited channel asks Redis first.

Critical takes tokens first. While a critical send waits on a channel, and for a hold window after
the last one, routine and background wait before each of their sends (routine keeps a minimum
share). A waiting sender holds no token and sleeps as long as the gate says, never spinning. The send claim
can ride in the gate's script (hold's ``claim``) when both live on one Redis: one round trip for the two.
"""

import dataclasses
import time
import uuid
from contextlib import contextmanager

from pipeline.conf import sluice_settings
from pipeline.connections import same_redis, script, shared_redis, shared_url
from pipeline.redis import keys

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


@dataclasses.dataclass
class Ask:
    """One send's question to its channel's gate: gate_acquire.lua's keys and arguments, and the concurrency
    slots (zsets) the send holds once granted."""

    channel: str
    klass: str
    keys: list
    args: list
    held: list
    lease: str
    max_wait_s: float


def ask(channel, klass, payload=None, max_wait_s=None):
    """The question a send on ``channel`` asks its gate, or None when the channel has no gate (or gates are off)."""
    gate = sluice_settings().channels[channel].gate
    if gate is None or not sluice_settings().gate_enabled:
        return None
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
    return Ask(channel, klass, gate_keys, args, held, lease, max_wait_s)


def on_redis_of(klass):
    """Whether the gates live on ``klass``'s own Redis (pipeline.connections.shared_url), so that a send
    claim of the class can be taken in the gate's round trip (hold's ``claim``)."""
    queue = sluice_settings().queues[klass]
    # A class on a Redis Cluster keeps its send claims in its partitions, never on the gates' Redis: two round trips,
    # as for a class on another Redis.
    return not queue.clustered and same_redis(queue.redis_url, shared_url())


@contextmanager
def slot(channel, klass, payload=None, max_wait_s=None):
    """Hold the right to send once on ``channel`` for the body of the ``with`` block."""
    request = ask(channel, klass, payload, max_wait_s)
    if request is None:
        yield
        return
    with hold(request):
        yield


@contextmanager
def hold(request, claim=None):
    """Wait for the gate's grant of ``request`` (an Ask) and hold it for the body of the ``with`` block.

    ``claim``, when given, is a send claim's (keys, args) for claim_send.lua, on the gate's own Redis (the caller
    checked on_redis_of): the claim is then looked at first and taken with the grant, in one round trip
    (claim_gate.lua), and the block gets the claim's reply: (b"claimed", 0) with the grant, or (b"sending" or
    b"sent", ms left) when the send is held or done elsewhere, and no room was taken at the gate.
    """
    deadline = time.monotonic() + request.max_wait_s
    reply = None
    while True:
        if claim is None:
            wait_ms = script("gate_acquire", on=shared_redis())(keys=request.keys, args=request.args)
        else:
            (claim_key, *mark_keys), claim_args = claim
            state, wait_ms = script("claim_gate", on=shared_redis())(
                keys=[claim_key, *request.keys, *mark_keys], args=[len(request.keys), *claim_args, *request.args]
            )
            if state != b"wait":
                reply = (state, wait_ms)
                if state != b"claimed":
                    yield reply
                    return
                wait_ms = 0
        if not wait_ms:
            break
        if time.monotonic() + wait_ms / 1000 > deadline:
            raise GateTimeout(
                f"channel {request.channel!r} had no room for a {request.klass} send within {request.max_wait_s} s"
            )
        time.sleep(wait_ms / 1000)
    try:
        yield reply
    finally:
        if request.held:
            pipe = shared_redis().pipeline(transaction=False)
            for key in request.held:
                pipe.zrem(key, request.lease)
            pipe.execute()
