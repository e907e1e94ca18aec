"""The Celery pipeline: app, queues and routing, admission, worker profiles, metrics, benchmarks."""

from .celery import app

__all__ = ["app"]
