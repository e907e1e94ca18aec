"""A simulated provider for benchmarks and tests: a fixed latency per send, an optional rate limit of its
own (callers queue for it, as at a real provider), and a record of every send in Redis."""

import json
import os
import time
from pathlib import Path

from notifications.channels.base import BaseChannel
from pipeline.store import Scripts, get_redis

script = Scripts(Path(__file__).resolve().parent.parent / "lua")

SENT_KEY = "sluice:bench:sent"


class SimulatedProvider(BaseChannel):
    """Options: ``latency_ms`` (time a send takes), ``rate_per_s`` (the provider's own limit, shared by
    every worker; a caller waits its turn), ``record`` (default true: RPUSH one JSON line per send)."""

    def send(self, message):
        client = get_redis()
        rate = self.options.get("rate_per_s")
        if rate:
            wait_ms = script("provider_pace")(keys=[f"sluice:bench:provider:{self.name}"], args=[1000 / rate])
            time.sleep(wait_ms / 1000)
        started = time.time()
        latency = self.options.get("latency_ms", 0) / 1000
        if latency:
            time.sleep(latency)
        if self.options.get("record", True):
            record = {
                "id": message.id,
                "channel": message.channel,
                "class": message.klass,
                "kind": message.kind,
                "entity_id": message.entity_id,
                "count": message.count,
                "started": started,
                # When the event happened: the payload's t0, or a digest's oldest folded event.
                "t0": message.first_seen or (message.payload.get("t0") if isinstance(message.payload, dict) else None),
                # Who sent it and when the provider returned: a kill after this and before the send's record
                # is the one place a resend can come from.
                "pid": os.getpid(),
                "done": time.time(),
            }
            client.rpush(SENT_KEY, json.dumps(record))


def sent_records(client=None):
    """Every recorded send so far, oldest first."""
    return [json.loads(raw) for raw in (client or get_redis()).lrange(SENT_KEY, 0, -1)]
