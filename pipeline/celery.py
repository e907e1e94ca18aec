"""The Celery app, configured from Django settings (namespace CELERY_)."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "settings")

app = Celery("sluice")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@app.on_after_configure.connect
def _declare_queues(sender, **kwargs):
    from .queues import celery_queue_settings

    sender.conf.update(celery_queue_settings())


# Imported for its signal receiver: every message is stamped with published_at.
from . import signals  # noqa: E402,F401
