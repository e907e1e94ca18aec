"""A channel backend for tests with worker subprocesses: it records each send in Redis."""

import json
import time

from notifications.channels.base import BaseChannel
from pipeline.store import get_redis

SENT_KEY = "test:sent"


class RedisRecorderChannel(BaseChannel):
    """RPUSHes one JSON record per send to ``test:sent``. Option ``delay_ms`` simulates a provider."""

    def send(self, message):
        started = time.time()
        delay = self.options.get("delay_ms", 0) / 1000
        if delay:
            time.sleep(delay)
        record = {
            "id": message.id,
            "channel": message.channel,
            "class": message.klass,
            "kind": message.kind,
            "entity_id": message.entity_id,
            "count": message.count,
            "started": started,
        }
        get_redis().rpush(SENT_KEY, json.dumps(record))


def sent_records(client):
    """Every record so far, oldest first."""
    return [json.loads(raw) for raw in client.lrange(SENT_KEY, 0, -1)]
