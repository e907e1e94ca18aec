"""The send claim of one message on one channel: taken before its send, ended after it (sent mark and counters)."""

import logging
import math
from contextlib import contextmanager

from redis.exceptions import RedisError

from pipeline import activity_fields, durability, metrics
from pipeline.broker import marks
from pipeline.conf import sluice_settings, transport_options
from pipeline.connections import class_redis, route, script
from pipeline.errors import NotReplicated, WaitRefused
from pipeline.gates import gate
from pipeline.redis import keys

logger = logging.getLogger("sluice.send")

# A claim outlives any single send attempt but expires no later than the broker's visibility
# timeout hands the message to another worker, so a crashed sender's claim never blocks a resend
# for longer than that: claim_ttl() caps it at the visibility timeout when that is shorter.
CLAIM_TTL_S = 120


def claim_ttl():
    """Seconds a send claim lives: CLAIM_TTL_S, or the broker's visibility timeout when that is shorter."""
    visibility = transport_options().get("visibility_timeout", CLAIM_TTL_S)
    return max(1, min(CLAIM_TTL_S, int(visibility)))


class ClaimedElsewhere(Exception):
    """Another worker holds the send claim, or died holding it and the claim has not expired."""

    def __init__(self, message, expires_in_s):
        super().__init__(message)
        self.expires_in_s = expires_in_s


def claim(message, published_at=None):
    """Claim the send of ``message`` on its channel: True when this worker now owns it, False when it already went
    out (counted as a duplicate); raises ClaimedElsewhere while another worker holds the claim. ``published_at``
    (when the message was first published) narrows the mark buckets looked in: its mark cannot be older."""
    claim_keys, claim_args = _claim_call(message, published_at)
    return _answer(message, *script("claim_send", on=class_redis(message.klass))(keys=claim_keys, args=claim_args))


@contextmanager
def gated_claim(message, published_at=None, max_wait_s=None):
    """Pass the channel's gate and claim the send (claim's answer for the ``with`` block), holding the gate's slot
    for the block; raises gate.GateTimeout when the gate had no room in ``max_wait_s`` (by default the gate's own
    limit for the class), ClaimedElsewhere as claim does.

    One round trip when the class's Redis is the gates' (one Redis for everything, the default; or critical's
    own): the claim is looked at first, so a send held or done elsewhere takes no room at the gate, and taken with
    the grant. A class on a Redis of its own passes the gate, then claims: two round trips.
    """
    request = gate.ask(message.channel, message.klass, message.payload, max_wait_s)
    if request is None:
        yield claim(message, published_at)
    elif not gate.on_redis_of(message.klass):
        with gate.hold(request):
            yield claim(message, published_at)
    else:
        with gate.hold(request, claim=_claim_call(message, published_at)) as (state, left_ms):
            yield _answer(message, state, left_ms)


def _claim_call(message, published_at):
    """claim_send.lua's keys (the claim, then the mark buckets its mark may be in) and arguments."""
    mark = marks.field(message.id, message.channel)
    return (
        [keys.sent(message.id, message.channel), *marks.candidates(mark, since=published_at)],
        [claim_ttl(), mark],
    )


def _answer(message, state, left_ms):
    """claim's answer from the script's reply: True (claimed), False (a duplicate), or ClaimedElsewhere."""
    if state == b"sent":
        metrics.count(metrics.sent_field(message.channel, message.klass, "duplicate"), klass=message.klass)
        return False
    if state == b"sending":
        expires_in_s = max(1, math.ceil(left_ms / 1000)) if left_ms > 0 else claim_ttl()
        raise ClaimedElsewhere(f"{message.id} on {message.channel} is being sent elsewhere", expires_in_s)
    return True


def record_end(message, status, seconds=None, also_count="", lateness=None, activity=None):
    """End a claimed send: mark it sent (or drop the claim so a retry may send) and count it, with one more
    counter field ``also_count``, for a scheduled send its ``lateness``, and the activity log's ``activity`` entry
    (a pipeline.activity_fields.Entry, or None) in the same round trip. True when it was recorded."""
    mark = marks.field(message.id, message.channel)
    try:
        mark_key, expire_at = marks.write_target(mark)
        finish_send(
            keys.sent(message.id, message.channel),
            message.channel,
            message.klass,
            status,
            seconds,
            (mark_key, mark, expire_at),
            also_count=also_count,
            lateness=lateness,
            activity=activity,
        )
        return True
    except RedisError as exc:
        # After a send that went out, failing here would send it again; the claim expires by itself
        # (claim_ttl), which is the most a redelivery waits.
        logger.warning("send %s on %s: its end was not recorded: %s", message.id, message.channel, describe(exc))
        return False


def finish_send(
    claim_key, channel, klass, status, seconds=None, mark=None, also_count="", lateness=None, activity=None
):
    """End a send: drop its claim, write its "sent" mark when ``status`` keeps one ("sent", "rejected"), and count
    it. ``mark`` is (hash key, field, hash expiry in Unix seconds), from pipeline.broker.marks; ``also_count`` is one
    more counter field to add one to (the message's processed count), saving a round trip; ``lateness`` (seconds
    past a scheduled send's send_at) goes into sluice_scheduled_lateness_seconds; ``activity`` (an Entry) is written
    to the activity log's buffer while SLUICE_ACTIVITY is on.

    A replicated class WAITs for its replicas in the same round trip; when they do not confirm, the end is counted
    and logged, never failed: the send went out, and a lost mark can only send it again after a failover, never
    lose it (docs/reliability.md)."""
    state = "sent" if status in ("sent", "rejected") else ""
    if state and mark is None:
        raise ValueError(f"a {status!r} send needs its mark: (hash key, field, expiry)")
    mark_key, mark_field, expire_at = mark or (claim_key, "", 0)
    bucket = total = count = ""
    if seconds is not None:
        bucket, total, count = metrics.duration_fields(channel, klass, seconds)
    late = ("", "", "", 0)
    if lateness is not None:
        late = (*metrics.lateness_fields(klass, max(0.0, lateness)), max(0.0, lateness))
    found = route(klass)
    log = sluice_settings().activity
    logged = ["0"]
    if activity is not None and log.enabled:
        logged = [log.buffer_entries, *(part for pair in activity_fields.encode(activity).items() for part in pair)]
    try:
        durability.run(
            script.get("finish_send"),
            keys=[claim_key, keys.counters(), mark_key, keys.activity()],
            args=[
                state,
                int(expire_at),
                metrics.sent_field(channel, klass, status),
                *(bucket, total, count, seconds or 0),
                mark_field,
                also_count,
                *late,
                *logged,
            ],
            client=found.client,
            queue=found.queue,
            klass=klass,
            step="end",
        )
    except WaitRefused as exc:
        metrics.count_unconfirmed(exc)  # pipeline.durability logged the refusal once; a line per send would bury it
    except NotReplicated as exc:
        metrics.count_unconfirmed(exc)
        logger.warning("a %s send on %s ended unconfirmed by its replicas: %s", klass, channel, exc)


def describe(exc):
    """An exception as its type and its text, for a log line or a dead letter."""
    return f"{type(exc).__name__}: {exc}"
