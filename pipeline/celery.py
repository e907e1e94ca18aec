"""Sluice's own Celery app, built on first use: its brokers are Sluice's Redis servers, its configuration is
Sluice's, and it changes nothing of the host project's Celery app.

Run it with the host's settings: ``DJANGO_SETTINGS_MODULE=mysite.settings celery -A pipeline worker ...``
(or ``manage.py worker critical``). Its configuration comes from Sluice's defaults below, overridden by the
``SLUICE_CELERY`` dict of Celery settings. Each class's queue lives on its class's Redis
(``SLUICE_QUEUES[class]["redis_url"]``): a worker's broker is the Redis of the queues it serves, chosen when it
starts, so it can never listen to another broker than the one its events go to; every publish goes to the Redis
of its queue, whatever the process's own broker is; beat and the web tier's default broker is critical's.

Importing this module builds nothing: get_app() (or the ``app`` attribute, which ``celery -A pipeline`` reads)
builds the app the first time it is asked for, and the task modules declare their tasks with ``task`` below,
which registers them when the app is built.
"""

import os
import threading
from collections.abc import Mapping
from functools import cached_property

import click
import kombu
from celery import Celery
from celery.app.amqp import AMQP as CeleryAMQP
from celery.local import PromiseProxy
from celery.signals import beat_init, before_task_publish, celeryd_init, import_modules
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from kombu.utils.url import maybe_sanitize_url

from pipeline.redis import addresses

TRANSPORTS = ("pipeline.broker.transport:Transport", "pipeline.broker.transport:SentinelTransport")

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
    # broker_transport_options: pipeline.conf.DEFAULT_TRANSPORT_OPTIONS, under SLUICE_CELERY's (broker_settings).
    # Soft shutdown: on a cold shutdown a worker gives running sends this long (Celery 5.5+).
    "worker_soft_shutdown_timeout": 30.0,
    "worker_enable_soft_shutdown_on_idle": True,
}
FORCED = {
    # Every pool fetches a message only when a slot is free, so no admitted message hides inside a worker's
    # prefetch buffer: queue depth (LLEN) is then exactly the work no worker has started.
    "worker_disable_prefetch": True,
    "worker_prefetch_multiplier": 1,
    # Routing lives in pipeline.broker.queues; an unknown queue is a bug, never a silent new queue.
    "task_create_missing_queues": False,
    # Only Sluice's periodic tasks, from django-celery-beat's tables (pipeline/beat.py).
    "beat_scheduler": "pipeline.beat:SluiceScheduler",
}


def broker_settings(url):
    """The broker settings for SLUICE_REDIS_URL ``url``: kombu's spelling of it, Sluice's transport (over Sentinel
    for sentinel://), the URL's TLS options, and the transport options over the defaults and SLUICE_CELERY's."""
    from .conf import transport_options

    found = addresses.celery_broker(url)
    found["broker_transport_options"] = {**transport_options(), **found["broker_transport_options"]}
    return found


class SluiceCeleryConfig(Mapping):
    """The app's configuration, read from Django settings the first time Celery asks for it."""

    @cached_property
    def _values(self):
        from .conf import celery_overrides, sluice_settings

        # The default broker (beat, the web tier): critical's Redis, whose queue runs the control tasks.
        critical = sluice_settings().queues["critical"].redis_url
        return {**DEFAULTS, **celery_overrides(), **FORCED, **broker_settings(critical)}

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

    def switch(self, conn_str):
        """kombu's switch to the next URL of a failover list, keeping Sluice's transport. kombu takes the next URL's
        scheme as the transport, so a worker that moved to another sentinel of the list (its Redis failed over)
        would run kombu's own Sentinel transport from then on: no reliable fetch, no heartbeat and no reaper, no
        ceilings. Every URL of Sluice's list names a sentinel of the same Redis (pipeline.redis.addresses)."""
        transport = self.transport_cls
        super().switch(conn_str)
        if transport in TRANSPORTS:
            self.transport_cls = transport

    def as_uri(self, *args, **kwargs):
        uri = super().as_uri(*args, **kwargs)
        head, sep, rest = uri.partition("://")
        return f"{self.scheme}{sep}{rest}" if self.scheme and head in TRANSPORTS else uri


class AMQP(CeleryAMQP):
    """Celery's AMQP helper whose every task message goes to the Redis of its queue's class."""

    Connection = Connection

    def _create_task_sender(self):
        send = super()._create_task_sender()

        def send_task_message(producer, name, message, queue=None, routing_key=None, **kwargs):
            url = broker_for(queue, routing_key)
            if url is None or producer is None or _same_broker(url, producer.connection):
                return send(producer, name, message, queue=queue, routing_key=routing_key, **kwargs)
            # The queue lives on another Redis than this process's broker (a flush asked for by a process whose
            # broker is routine's, say): publish it there, where its workers listen.
            with _connection_for(self.app, url) as connection:
                with kombu.pools.producers[connection].acquire(block=True) as other:
                    return send(other, name, message, queue=queue, routing_key=routing_key, **kwargs)

        return send_task_message


def broker_for(queue, routing_key=None):
    """The Redis URL of the class whose queue ``queue`` (a Queue or a name) or ``routing_key`` names, or None."""
    from .conf import CLASSES, sluice_settings

    name = getattr(queue, "name", queue) or routing_key
    queues = sluice_settings().queues
    return next((queues[k].redis_url for k in CLASSES if name in queues[k].queue_names), None)


def _connection_for(app, url):
    """A connection to another class's Redis with that URL's own transport, options and TLS (a sentinel:// class
    beside a redis:// one)."""
    found = broker_settings(url)
    # Celery merges the app's own broker options (critical's) under these: a master name and sentinel credentials
    # of critical's Sentinel must never be sent to another Redis's sentinels.
    options = {"master_name": None, "sentinel_kwargs": None, **found["broker_transport_options"]}
    return app.connection_for_write(
        found["broker_url"],
        transport=found["broker_transport"],
        transport_options=options,
        ssl=found["broker_use_ssl"],
    )


def _same_broker(url, connection):
    info = connection.info()
    if info.get("transport_options", {}).get("sentinels"):
        return False
    db = str(info.get("virtual_host") or "").strip("/") or "0"
    theirs = ("tcp", info.get("hostname") or "localhost", int(info.get("port") or 6379), int(db) if db.isdigit() else 0)
    return addresses.identity(url) == theirs


NO_SETTINGS = (
    "Sluice's Celery app runs with your project's settings and never guesses them: set "
    "DJANGO_SETTINGS_MODULE, for example DJANGO_SETTINGS_MODULE=mysite.settings celery -A pipeline worker"
)

_lock = threading.Lock()
_app = None
#: The tasks declared before the app was built, as (function, options): registered when it is.
_declared = []


def get_app():
    """Sluice's Celery app, built the first time it is asked for.

    Not at import: building it reads the environment (Celery's Django fixup), and a process that only imports
    Sluice (a host's management command, a tool, a test of one module) needs none of it.
    """
    if _app is None:
        with _lock:
            if _app is None:
                _build()
    return _app


def __getattr__(name):
    # `celery -A pipeline` (celery.app.utils.find_app) reads the package's `app`, then its `celery` module's.
    if name == "app":
        return get_app()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def task(*, name, **options):
    """Declare a task of Sluice's app, as ``@app.task(name=..., ...)`` would, without building the app.

    Returns a proxy of the task, resolved on first use. Each task module is imported by the app that owns it
    (its AppConfig.ready()), never discovered by name, so the import contracts see who imports what. The tasks
    are Sluice's app's alone (not shared): a host's app never lists them.
    """

    def declare(fun):
        with _lock:
            if _app is None:
                _declared.append((fun, {"name": name, **options}))
            else:
                _app.task(fun, shared=False, name=name, **options)
        return PromiseProxy(_registered, (name,), __doc__=fun.__doc__)

    return declare


def _registered(name):
    return get_app().tasks[name]


def _build():
    global _app
    _require_settings()
    # Before the app exists, so before Celery's Django fixup connects its own receiver as the app is made: Flower
    # without a login is refused before Django is set up.
    import_modules.connect(_refuse_flower_without_auth, dispatch_uid="sluice.celery.flower_auth")
    # Not the current app: the host's @shared_task tasks keep binding to the host's own app.
    app = Celery("sluice", amqp=AMQP, set_as_current=False)
    app.config_from_object(SluiceCeleryConfig())
    app.on_after_configure.connect(_declare_queues, weak=False)
    for fun, options in _declared:
        app.task(fun, shared=False, **options)
    _declared.clear()
    from pipeline.broker.publish_stamp import stamp_published_at

    # Connected once, here: a process that never builds Sluice's app has none of Sluice's receivers.
    celeryd_init.connect(_broker_of_its_queues, dispatch_uid="sluice.celery.broker_of_its_queues")
    beat_init.connect(_beat_started, dispatch_uid="sluice.celery.beat_started")
    before_task_publish.connect(stamp_published_at, dispatch_uid="sluice.signals.published_at")
    _app = app


def _require_settings():
    """Refuse to build the app without the host's settings: Sluice never guesses DJANGO_SETTINGS_MODULE."""
    if os.environ.get("DJANGO_SETTINGS_MODULE") or settings.configured:
        return
    context = click.get_current_context(silent=True)
    if context is not None and context.find_root().command.name == "celery":
        # Asked for by the celery command (-A pipeline): one line, not the traceback of Celery loading its app.
        _refuse(NO_SETTINGS)
    raise ImproperlyConfigured(NO_SETTINGS)


def _declare_queues(sender, **kwargs):
    from pipeline.broker.queues import celery_queue_settings

    sender.conf.update(celery_queue_settings())


def _broker_of_its_queues(sender=None, instance=None, conf=None, options=None, **kwargs):
    """A Sluice worker listens on the Redis its queues' events go to, or does not start: one Redis per worker."""
    app = _app
    if app is None or getattr(instance, "app", None) is not app:
        return
    from .conf import CLASSES, sluice_settings

    queues = sluice_settings().queues
    asked = (options or {}).get("queues") or [name for k in CLASSES for name in queues[k].queue_names]
    if isinstance(asked, str):
        asked = asked.split(",")
    asked = {name.strip() for name in asked}
    serving = [k for k in CLASSES if asked & set(queues[k].queue_names)]
    for klass in serving:
        missing = [name for name in queues[klass].queue_names if name not in asked]
        if missing:
            _refuse(
                f"this worker consumes only some partitions of the {klass} class (missing {len(missing)} of "
                f"{queues[klass].partitions}): a worker of a class on a Redis Cluster consumes every partition, "
                f"so start it with `manage.py worker {klass}`"
            )
    found = list({addresses.identity(queues[k].redis_url): queues[k].redis_url for k in serving}.values())
    if len(found) > 1:
        where = ", ".join(f"{k} on {addresses.describe(queues[k].redis_url)}" for k in serving)
        _refuse(
            f"this worker serves queues on different Redis servers ({where}): a worker has one broker, so run one "
            "worker per Redis (manage.py worker <class>), as SLUICE_QUEUES[class]['redis_url'] places them"
        )
    if not found:
        return
    expected = broker_settings(found[0])
    app.conf.update(expected)
    # Dropped, not closed: nothing has connected yet, and kombu hands pools back by URL.
    app._pool = None
    app.amqp._producer_pool = None
    actual = app.conf.broker_url
    if actual != expected["broker_url"]:
        _refuse(
            f"this worker's broker is {maybe_sanitize_url(actual)}, but its queues' events are published to "
            f"{addresses.describe(found[0])} (SLUICE_QUEUES[class]['redis_url']): drop the --broker option"
        )


def _beat_started(sender=None, **kwargs):
    """Sluice's beat service started (not a host's, nor a scheduler made by a test or a tool): say so."""
    if _app is None or getattr(sender, "app", None) is not _app:
        return
    from pipeline.beat import beat_ready

    beat_ready.send(sender=type(sender))


def _refuse(problem):
    """Stop the command starting: Celery logs and swallows a signal receiver's exceptions, but not SystemExit."""
    raise SystemExit(f"{ImproperlyConfigured.__name__}: {problem}")


def _refuse_flower_without_auth(sender=None, **kwargs):
    """`celery -A pipeline flower` from any working directory: no login, no Flower.

    Flower imports its app's modules as it starts (this signal), before it listens: the command being run, and
    its own arguments, are click's current context, so nothing reads sys.argv, and nothing at import.
    """
    if _app is None or sender is not _app:
        return
    context = click.get_current_context(silent=True)
    if context is None or context.command.name != "flower":
        return
    from pipeline.broker.flower_auth import refuse_without_auth

    try:
        refuse_without_auth(list(context.params.get("tornado_argv") or ()))
    except ImproperlyConfigured as exc:
        _refuse(str(exc))
