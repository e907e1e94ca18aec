"""Stamp every published message with published_at, the base of queue latency."""

import time

PUBLISHED_AT = "published_at"


# Connected to Celery's before_task_publish when Sluice's app is built (pipeline.celery), not at import.
def stamp_published_at(sender=None, headers=None, **kwargs):
    """Record when one of Sluice's messages entered the broker (its own builder stamps the rest); the
    host's tasks are left as they are."""
    if headers is not None and str(sender).startswith("sluice."):
        headers.setdefault(PUBLISHED_AT, time.time())
