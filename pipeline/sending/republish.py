"""Publish a send task's message again, for a retry or back at the end of its queue, with Sluice's builder.

Celery's own task.retry() drops the redacted argument repr and, when it cannot publish, rejects the
original message for good. Sluice republishes with the same builder as the first publish instead, so the
retry keeps its redaction, its first published_at and its retry count, and a failure to publish is an
exception the send task turns into a requeue of the original.
"""

import json
import time

from pipeline.broker.message import send_message
from pipeline.connections import route, script
from pipeline.errors import QueueCeilingReached


def republish(klass, task_id, kwargs, *, published_at, retries, countdown=0):
    """Push the message again onto ``klass``'s queue, due in ``countdown`` seconds; raise at the ceiling.

    A retry skips admission (its event was admitted once), but never the hard ceiling.
    """
    found = route(klass)  # on a Redis Cluster, the partition whose message this is
    queue = found.queue
    message = send_message(
        klass,
        task_id,
        json.dumps(kwargs, separators=(",", ":"), ensure_ascii=False),
        queue.name,
        kwargs.get("kind"),
        kwargs.get("count", 1),
        published_at=published_at,
        retries=retries,
        eta=time.time() + countdown if countdown > 0 else None,
    )
    depth = script("push_capped", on=found.client)(keys=[queue.name, *found.lists], args=[queue.ceiling, message])
    if depth < 0:
        raise QueueCeilingReached(f"queue {queue.name!r} is at its hard ceiling of {queue.ceiling} messages")
