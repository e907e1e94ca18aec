"""A simulated provider for benchmarks and tests: a fixed latency per call plus a smaller one per message, a bulk
call (send_many, one round trip for many messages, like a multicast), an optional rate limit of its own (callers
queue for it, as at a real provider), and a record of every send in Redis."""

import json
import os
import time
from pathlib import Path

from notifications.channels.base import BaseChannel
from pipeline.connections import Scripts, get_redis
from pipeline.redis import keys

script = Scripts(Path(__file__).resolve().parent.parent / "lua")

SENT_KEY = keys.bench("sent")


class SimulatedProvider(BaseChannel):
    """Options: ``latency_ms`` (time one call takes: a round trip), ``per_message_ms`` (time each message of a
    call adds, default 0), ``rate_per_s`` (the provider's own limit on calls, shared by every worker; a caller
    waits its turn), ``record`` (default true: RPUSH one JSON line per message sent), ``bulk`` (default false: the
    backend has no bulk call and sends one message a call, as the benchmarks before batches measured; true:
    send_many is one call for all its messages)."""

    @property
    def supports_send_many(self):
        return bool(self.options.get("bulk", False))

    def send(self, message):
        self._call([message])

    def send_many(self, messages):
        if not self.supports_send_many:
            return super().send_many(messages)
        self._call(messages)
        return [None] * len(messages)

    def _call(self, messages):
        client = get_redis()
        rate = self.options.get("rate_per_s")
        if rate:
            wait_ms = script("provider_pace")(keys=[keys.bench("provider", self.name)], args=[1000 / rate])
            time.sleep(wait_ms / 1000)
        started = time.time()
        cost = self.options.get("latency_ms", 0) + self.options.get("per_message_ms", 0) * len(messages)
        if cost:
            time.sleep(cost / 1000)
        if self.options.get("record", True):
            done = time.time()
            client.rpush(
                SENT_KEY, *[json.dumps(_record(message, started, done, len(messages))) for message in messages]
            )


def _record(message, started, done, size):
    return {
        "id": message.id,
        "channel": message.channel,
        "class": message.klass,
        "kind": message.kind,
        "entity_id": message.entity_id,
        # Whom it went to: a fan-out's test counts each subscriber's sends (a bench tool's record, never a metric).
        "user": message.user_id,
        "count": message.count,
        "started": started,
        # When the event happened: the payload's t0, or a digest's oldest folded event.
        "t0": message.first_seen or (message.payload.get("t0") if isinstance(message.payload, dict) else None),
        # Who sent it and when the provider returned: a kill after this and before the send's record
        # is the one place a resend can come from.
        "pid": os.getpid(),
        # Its process group: a prefork child sends, and a kill of the worker's group names the group (its leader).
        "pgid": os.getpgid(0),
        "done": done,
        # How many messages the call carried (1 for a single send).
        "call_size": size,
    }


def sent_records(client=None):
    """Every recorded send so far, oldest first."""
    return [json.loads(raw) for raw in (client or get_redis()).lrange(SENT_KEY, 0, -1)]
