"""Queue latency: the age of the oldest message still waiting, read at the tail of the list."""

import json
from datetime import datetime

from pipeline.broker.publish_stamp import PUBLISHED_AT
from pipeline.conf import queue_lists

# Future-ETA messages are skipped, so look a little past the very tail for one that is due.
SCAN = 50


def message_age(raw, now):
    """How long one stored message has been waiting; None when it is not due yet or carries no time.

    As Judoscale does it: a past ETA counts from the ETA, a future ETA is not waiting at all.
    """
    try:
        headers = json.loads(raw).get("headers") or {}
    except (ValueError, AttributeError):
        return None
    eta = headers.get("eta")
    if eta:
        try:
            due = datetime.fromisoformat(eta).timestamp()
        except (TypeError, ValueError):
            due = None
        if due is not None:
            return now - due if due <= now else None
    published = headers.get(PUBLISHED_AT)
    return now - float(published) if isinstance(published, (int, float)) else None


def oldest_ages(client, queue_names, now):
    """{queue: age in seconds of its oldest due message (0.0 when none)}, across priority sub-lists."""
    pipe = client.pipeline(transaction=False)
    lists = {name: queue_lists(name) for name in queue_names}
    for names in lists.values():
        for name in names:
            pipe.lrange(name, -SCAN, -1)
    tails = iter(pipe.execute())
    ages = {}
    for queue, names in lists.items():
        oldest = 0.0
        for _ in names:
            # Producers LPUSH and workers BRPOP, so the oldest message is the last one.
            for raw in reversed(next(tails)):
                age = message_age(raw, now)
                if age is not None:
                    oldest = max(oldest, age)
                    break
        ages[queue] = oldest
    return ages
