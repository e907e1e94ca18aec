"""Point this process's Sluice at one Redis: the settings, the settings cache and the Celery app's connections.

For the tools (benchmarks, the demo) and the tests, which own their process and start a Redis of their own; a
deployment sets SLUICE_REDIS_URL (and each class's SLUICE_QUEUES[class]["redis_url"]) instead.
"""

from django.conf import settings

from pipeline.celery import broker_settings, get_app
from pipeline.conf import sluice_settings


def use_redis(url):
    """Point Sluice at the Redis at ``url`` from now on, in this process, every class and the digest included: the
    settings, and the Celery app's broker and connection pools (the store picks its clients by URL)."""
    settings.SLUICE_REDIS_URL = url
    queues = getattr(settings, "SLUICE_QUEUES", {}) or {}
    if any("redis_url" in conf for conf in queues.values() if isinstance(conf, dict)):
        settings.SLUICE_QUEUES = {
            klass: {k: v for k, v in conf.items() if k != "redis_url"} if isinstance(conf, dict) else conf
            for klass, conf in queues.items()
        }
    digest = getattr(settings, "SLUICE_DIGEST", {}) or {}
    if isinstance(digest, dict) and "redis_url" in digest:
        settings.SLUICE_DIGEST = {k: v for k, v in digest.items() if k != "redis_url"}
    sluice_settings.cache_clear()
    app = get_app()
    app.conf.update(broker_settings(url))
    # Dropped, not closed: kombu keeps the pools in a registry by URL, and hands the same one back when a
    # process points at that URL again.
    app._pool = None
    app.amqp._producer_pool = None
