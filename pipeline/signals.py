"""Stamp every published message with published_at, the base of queue latency."""

import time

from celery.signals import before_task_publish

PUBLISHED_AT = "published_at"


@before_task_publish.connect
def stamp_published_at(headers=None, **kwargs):
    """Record when a message entered the broker; the fast path in pipeline.publish stamps its own."""
    if headers is not None:
        headers.setdefault(PUBLISHED_AT, time.time())
