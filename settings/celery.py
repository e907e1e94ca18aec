"""Celery settings (namespace CELERY_), read by pipeline.celery through config_from_object."""

import os

CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL") or os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_RESULT_SERIALIZER = "json"
# Sends are fire-and-forget; results would only fill Redis.
CELERY_TASK_IGNORE_RESULT = True
CELERY_RESULT_BACKEND = None
CELERY_TIMEZONE = "UTC"
CELERY_ENABLE_UTC = True
# Routing lives in pipeline.queues; an unknown queue is a bug, never a silent new queue.
CELERY_TASK_CREATE_MISSING_QUEUES = False
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
# Events let Flower show tasks live.
CELERY_WORKER_SEND_TASK_EVENTS = True
CELERY_TASK_SEND_SENT_EVENT = False
CELERY_BROKER_TRANSPORT_OPTIONS = {
    # Longer than the longest send plus its retries: an unacked message older than this is
    # handed to another worker, so a shorter value would send twice.
    "visibility_timeout": int(os.environ.get("SLUICE_VISIBILITY_TIMEOUT_S", "300")),
    # Only matters to a worker that consumes several queues or priority steps on one (the benchmark's
    # "Celery priorities on one queue" baseline sets "priority"); Sluice's pools consume one queue each.
    "queue_order_strategy": os.environ.get("CELERY_QUEUE_ORDER_STRATEGY", "round_robin"),
    # A worker that has not said it is alive for this long is dead: the reaper puts its fetched and
    # unacked messages back at once (pipeline/transport.py), instead of after the visibility timeout.
    "fetch_dead_after_s": float(os.environ.get("SLUICE_FETCH_DEAD_AFTER_S", "60")),
}
# Every pool fetches a message only when a slot is free, so no admitted message hides inside a
# worker's prefetch buffer: queue depth (LLEN) is then exactly the work no worker has started.
CELERY_WORKER_DISABLE_PREFETCH = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# Soft shutdown: on SIGTERM a worker finishes what it started before it goes (Celery 5.5+).
CELERY_WORKER_SOFT_SHUTDOWN_TIMEOUT = float(os.environ.get("SLUICE_SOFT_SHUTDOWN_S", "30"))
CELERY_WORKER_ENABLE_SOFT_SHUTDOWN_ON_IDLE = True
