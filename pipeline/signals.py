"""Stamp every published message with published_at, the base of queue latency."""

import time

from celery.signals import before_task_publish

PUBLISHED_AT = "published_at"


@before_task_publish.connect
def stamp_published_at(sender=None, headers=None, **kwargs):
    """Record when one of Sluice's messages entered the broker (its own builder stamps the rest); the
    host's tasks are left as they are."""
    if headers is not None and str(sender).startswith("sluice."):
        headers.setdefault(PUBLISHED_AT, time.time())
