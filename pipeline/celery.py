"""The Celery app, configured from Django settings (namespace CELERY_)."""

import os

from celery import Celery
from kombu.transport import TRANSPORT_ALIASES

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "settings")

# redis:// and rediss:// mean kombu's Redis transport plus the hard queue ceiling on every publish
# (pipeline/transport.py). Aliasing keeps the URL scheme "redis", which Flower's broker page and
# `celery inspect` read; a broker_transport setting would have put a class path in its place.
TRANSPORT_ALIASES["redis"] = TRANSPORT_ALIASES["rediss"] = "pipeline.transport:Transport"

app = Celery("sluice")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@app.on_after_configure.connect
def _declare_queues(sender, **kwargs):
    from .queues import celery_queue_settings

    sender.conf.update(celery_queue_settings())


# Imported for its signal receiver: every message is stamped with published_at.
from . import signals  # noqa: E402,F401
