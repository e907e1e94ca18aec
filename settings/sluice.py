"""Sluice defaults (prefix SLUICE_); JSON in an environment variable of the same name overrides them.

The values are validated by ``pipeline.conf`` and its system checks, never here.
"""

import json
import os

from sluice_tools.demo_kinds import DEMO_KINDS


def _env_json(name, default):
    raw = os.environ.get(name)
    if raw is None:
        return default
    try:
        return json.loads(raw)
    except ValueError as exc:
        from django.core.exceptions import ImproperlyConfigured

        raise ImproperlyConfigured(f"{name} in the environment is not valid JSON: {exc}") from exc


# One Redis is Sluice's broker and its coordination store (docs/architecture.md, "Decisions").
SLUICE_REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")

# A Redis per class (optional): REDIS_URL_CRITICAL, REDIS_URL_ROUTINE, REDIS_URL_BACKGROUND, each merged into
# SLUICE_QUEUES[class]["redis_url"] below; a class without one uses REDIS_URL (docs/scaling.md).
CLASS_REDIS_URLS = {
    klass: os.environ[f"REDIS_URL_{klass.upper()}"]
    for klass in ("critical", "routine", "background")
    if os.environ.get(f"REDIS_URL_{klass.upper()}")
}

# Sluice's own Celery app (pipeline/celery.py) keeps its defaults but for these, from the environment.
SLUICE_CELERY = {
    "broker_transport_options": {
        "visibility_timeout": int(os.environ.get("SLUICE_VISIBILITY_TIMEOUT_S", "300")),
        "fetch_dead_after_s": float(os.environ.get("SLUICE_FETCH_DEAD_AFTER_S", "60")),
        # Only matters to a worker that consumes several priority steps on one queue (the benchmark's
        # "Celery priorities on one queue" baseline sets "priority"); Sluice's pools consume one queue each.
        "queue_order_strategy": os.environ.get("CELERY_QUEUE_ORDER_STRATEGY", "round_robin"),
    },
    "worker_soft_shutdown_timeout": float(os.environ.get("SLUICE_SOFT_SHUTDOWN_S", "30")),
}

# capacity = target drain time x measured pool throughput: 2048 ~ 37 s x 55 msg/s.
SLUICE_QUEUES = _env_json(
    "SLUICE_QUEUES",
    {
        "critical": {"capacity": 2048, "wait_ms": 250},
        "routine": {"capacity": 2048, "wait_ms": 0},
        "background": {"capacity": 2048, "wait_ms": 0},
    },
)
if CLASS_REDIS_URLS and isinstance(SLUICE_QUEUES, dict):  # (a bad value is pipeline.conf's to report)
    SLUICE_QUEUES = {klass: SLUICE_QUEUES.get(klass, {}) for klass in ("critical", "routine", "background")} | {
        k: v for k, v in SLUICE_QUEUES.items() if k not in ("critical", "routine", "background")
    }
    SLUICE_QUEUES = {
        klass: {**conf, "redis_url": CLASS_REDIS_URLS[klass]}
        if klass in CLASS_REDIS_URLS and isinstance(conf, dict)
        else conf
        for klass, conf in SLUICE_QUEUES.items()
    }

SLUICE_CHANNELS = _env_json(
    "SLUICE_CHANNELS",
    {
        "email": {"backend": "notifications.channels.email.EmailChannel"},
        "sms": {"backend": "notifications.channels.console.ConsoleChannel"},
        "push": {"backend": "notifications.channels.console.ConsoleChannel"},
    },
)

# A project declares its kinds here; this one models a calendar and task product, as in the demo.
SLUICE_KINDS = _env_json("SLUICE_KINDS", DEMO_KINDS)

# Scheduled sends (docs/scheduling.md): the defaults unless the environment says otherwise.
SLUICE_SCHEDULE = _env_json("SLUICE_SCHEDULE", {})

SLUICE_MAX_PAYLOAD_BYTES = int(os.environ.get("SLUICE_MAX_PAYLOAD_BYTES", 16 * 1024))

SLUICE_DIGEST = _env_json("SLUICE_DIGEST", {"flush_interval_s": 60, "max_keys": 200})
# The activity log (docs/activity.md): on, with the resolver's defaults, unless the environment says otherwise.
SLUICE_ACTIVITY = _env_json("SLUICE_ACTIVITY", {})
# The digest's own Redis (optional): REDIS_URL_DIGEST keeps every fold there instead of on its class's Redis.
if os.environ.get("REDIS_URL_DIGEST") and isinstance(SLUICE_DIGEST, dict):
    SLUICE_DIGEST = {**SLUICE_DIGEST, "redis_url": os.environ["REDIS_URL_DIGEST"]}

# The channel gate's kill switch: False lets every class send without waiting on a shared channel.
SLUICE_GATE_ENABLED = os.environ.get("SLUICE_GATE_ENABLED", "1") not in ("0", "false", "False")

# The exporter has no login: loopback unless the deployment fences it (the chart binds every address and ships
# a NetworkPolicy).
SLUICE_EXPORTER_HOST = os.environ.get("SLUICE_EXPORTER_HOST", "127.0.0.1")


def _with_secret_options(channels, secret_options):
    """Channel options that are secrets (a webhook's signing secret, a provider's API key), as JSON from the
    environment, merged into SLUICE_CHANNELS: {"webhook": {"secret": "..."}}. The chart keeps it in its Secret."""
    from django.core.exceptions import ImproperlyConfigured

    if not isinstance(secret_options, dict):
        raise ImproperlyConfigured("SLUICE_CHANNEL_OPTIONS in the environment must be a JSON object")
    merged = dict(channels)
    for name, options in secret_options.items():
        if name not in merged or not isinstance(options, dict):
            raise ImproperlyConfigured(
                f"SLUICE_CHANNEL_OPTIONS names {name!r}: it must be a channel of SLUICE_CHANNELS, with an object"
            )
        merged[name] = {**merged[name], "options": {**merged[name].get("options", {}), **options}}
    return merged


SLUICE_CHANNELS = _with_secret_options(SLUICE_CHANNELS, _env_json("SLUICE_CHANNEL_OPTIONS", {}))


def _site_url():
    """Where people reach this site, for the links in emails: the first of DJANGO_ALLOWED_HOSTS that is not loopback
    or a pattern, over HTTPS (the chart sets them from config.allowedHosts); else the demo's own address."""
    loopback = {"localhost", "127.0.0.1", "[::1]", "::1"}
    for host in os.environ.get("DJANGO_ALLOWED_HOSTS", "").split(","):
        host = host.strip()
        if host and host not in loopback and not host.startswith((".", "*")):
            return f"https://{host}"
    return "http://localhost:8000"


# The links in emails (one-click unsubscribe, the preference page) are absolute: workers have no request to read the
# host from.
SLUICE_SITE_URL = os.environ.get("SLUICE_SITE_URL") or _site_url()
# The emails' header: the site's name and logo (docs/email.md).
SLUICE_EMAIL = _env_json("SLUICE_EMAIL", {"site_name": "Sluice", "logo_url": "/static/sluice_tools/logo.png"})
# A user model attribute (or a dotted path to a callable taking the user) that gives each person's language.
SLUICE_USER_LANGUAGE = os.environ.get("SLUICE_USER_LANGUAGE") or None
