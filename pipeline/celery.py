"""Sluice's own Celery app: its broker is Sluice's Redis, its configuration is Sluice's, and it changes
nothing of the host project's Celery app.

Run it with the host's settings: ``DJANGO_SETTINGS_MODULE=mysite.settings celery -A pipeline worker ...``
(or ``manage.py worker critical``). Its configuration comes from Sluice's defaults below, overridden by the
``SLUICE_CELERY`` dict of Celery settings; the broker is always ``SLUICE_REDIS_URL``, the Redis that
notify() publishes to, so a worker can never listen to another broker than the one events go to.
"""

import os
import sys
from collections.abc import Mapping
from functools import cached_property

import kombu
from celery import Celery
from celery.app.amqp import AMQP as CeleryAMQP
from celery.signals import worker_init
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from kombu.utils.url import maybe_sanitize_url

from . import urls

if not os.environ.get("DJANGO_SETTINGS_MODULE") and not settings.configured:
    raise ImproperlyConfigured(
        "Sluice's Celery app runs with your project's settings and never guesses them: set "
        "DJANGO_SETTINGS_MODULE, for example DJANGO_SETTINGS_MODULE=mysite.settings celery -A pipeline worker"
    )

TRANSPORTS = ("pipeline.transport:Transport", "pipeline.transport:SentinelTransport")

#: Sluice's Celery configuration. SLUICE_CELERY overrides any of it, except what Sluice owns (FORCED).
DEFAULTS = {
    "task_serializer": "json",
    "accept_content": ["json"],
    "result_serializer": "json",
    # Sends are fire-and-forget; results would only fill Redis.
    "task_ignore_result": True,
    "result_backend": None,
    "timezone": "UTC",
    "enable_utc": True,
    "broker_connection_retry_on_startup": True,
    # Events let Flower show tasks live.
    "worker_send_task_events": True,
    "task_send_sent_event": False,
    "broker_transport_options": {
        # Longer than the longest send plus its retries: an unacked message older than this is handed to
        # another worker, so a shorter value would send twice.
        "visibility_timeout": 300,
        "queue_order_strategy": "round_robin",
        # A worker that has not said it is alive for this long is dead: the reaper puts its fetched and
        # unacked messages back at once (pipeline/transport.py), instead of after the visibility timeout.
        "fetch_dead_after_s": 60,
    },
    # Soft shutdown: on a cold shutdown a worker gives running sends this long (Celery 5.5+).
    "worker_soft_shutdown_timeout": 30.0,
    "worker_enable_soft_shutdown_on_idle": True,
}
FORCED = {
    # Every pool fetches a message only when a slot is free, so no admitted message hides inside a worker's
    # prefetch buffer: queue depth (LLEN) is then exactly the work no worker has started.
    "worker_disable_prefetch": True,
    "worker_prefetch_multiplier": 1,
    # Routing lives in pipeline.queues; an unknown queue is a bug, never a silent new queue.
    "task_create_missing_queues": False,
    # Only Sluice's periodic tasks, from django-celery-beat's tables (pipeline/beat.py).
    "beat_scheduler": "pipeline.beat:SluiceScheduler",
}


def broker_settings(url):
    """The broker settings for SLUICE_REDIS_URL ``url``: kombu's spelling of it, Sluice's transport (over Sentinel
    for sentinel://), the URL's TLS options, and the transport options over the defaults and SLUICE_CELERY's."""
    from .conf import celery_overrides

    found = urls.celery_broker(url)
    found["broker_transport_options"] = {
        **DEFAULTS["broker_transport_options"],
        **celery_overrides().get("broker_transport_options", {}),
        **found["broker_transport_options"],
    }
    return found


class SluiceCeleryConfig(Mapping):
    """The app's configuration, read from Django settings the first time Celery asks for it."""

    @cached_property
    def _values(self):
        from .conf import celery_overrides, sluice_settings

        return {**DEFAULTS, **celery_overrides(), **FORCED, **broker_settings(sluice_settings().redis_url)}

    def __getitem__(self, key):
        return self._values[key]

    def __iter__(self):
        return iter(self._values)

    def __len__(self):
        return len(self._values)


class Connection(kombu.Connection):
    """A kombu Connection of Sluice's transport (reliable fetch, ceilings) whose URL keeps its redis:// scheme.

    The transport is chosen by this app's broker_transport setting, not by rewriting kombu's global aliases,
    so the host's own Celery app keeps kombu's; and as_uri() shows the URL's own scheme, which Flower's broker
    page and `celery inspect` read, rather than the transport's class path.
    """

    def __init__(self, hostname="localhost", *args, **kwargs):
        self.scheme = hostname.split("://", 1)[0] if isinstance(hostname, str) and "://" in hostname else None
        super().__init__(hostname, *args, **kwargs)

    def as_uri(self, *args, **kwargs):
        uri = super().as_uri(*args, **kwargs)
        head, sep, rest = uri.partition("://")
        return f"{self.scheme}{sep}{rest}" if self.scheme and head in TRANSPORTS else uri


class AMQP(CeleryAMQP):
    Connection = Connection


# Not the current app: the host's @shared_task tasks keep binding to the host's own app.
app = Celery("sluice", amqp=AMQP, set_as_current=False)
app.config_from_object(SluiceCeleryConfig())
app.autodiscover_tasks(["notifications", "digest"])


@app.on_after_configure.connect
def _declare_queues(sender, **kwargs):
    from .queues import celery_queue_settings

    sender.conf.update(celery_queue_settings())


@worker_init.connect
def _refuse_another_broker(sender=None, **kwargs):
    """A Sluice worker listens where notify() publishes, or does not start."""
    if getattr(sender, "app", None) is not app:
        return
    from .conf import sluice_settings

    expected, actual = sluice_settings().redis_url, app.conf.broker_url
    if actual != broker_settings(expected)["broker_url"]:
        raise ImproperlyConfigured(
            f"this worker's broker is {maybe_sanitize_url(actual)}, but notify() publishes to "
            f"SLUICE_REDIS_URL ({urls.describe(expected)}): drop the --broker option"
        )


def _refuse_flower_without_auth(argv):
    """`celery -A pipeline flower` from any working directory: no login, no Flower."""
    program = argv[0] if argv else ""
    celery_cli = os.path.basename(program) == "celery" or program.endswith(os.path.join("celery", "__main__.py"))
    if celery_cli and "flower" in argv[1:]:
        from .flower import refuse_without_auth

        refuse_without_auth(argv[argv.index("flower") + 1 :])


_refuse_flower_without_auth(sys.argv)

# Imported for its signal receiver: every message is stamped with published_at.
from . import signals  # noqa: E402,F401
