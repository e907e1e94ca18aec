"""Sluice defaults (prefix SLUICE_); JSON in an environment variable of the same name overrides them.

The values are validated by ``notifications.conf`` and its system checks, never here.
"""

import json
import os


def _env_json(name, default):
    raw = os.environ.get(name)
    if raw is None:
        return default
    try:
        return json.loads(raw)
    except ValueError as exc:
        from django.core.exceptions import ImproperlyConfigured

        raise ImproperlyConfigured(f"{name} in the environment is not valid JSON: {exc}") from exc


# capacity = target drain time x measured pool throughput: 2048 ~ 37 s x 55 msg/s.
SLUICE_QUEUES = _env_json(
    "SLUICE_QUEUES",
    {
        "critical": {"capacity": 2048, "wait_ms": 250},
        "routine": {"capacity": 2048, "wait_ms": 0},
        "background": {"capacity": 2048, "wait_ms": 0},
    },
)

SLUICE_CHANNELS = _env_json(
    "SLUICE_CHANNELS",
    {
        "email": {"backend": "notifications.channels.email.EmailChannel"},
        "sms": {"backend": "notifications.channels.console.ConsoleChannel"},
        "push": {"backend": "notifications.channels.console.ConsoleChannel"},
    },
)

# A project adds kinds here; the defaults model a calendar and task product.
SLUICE_KINDS = _env_json("SLUICE_KINDS", {})

SLUICE_MAX_PAYLOAD_BYTES = int(os.environ.get("SLUICE_MAX_PAYLOAD_BYTES", 16 * 1024))

SLUICE_DIGEST = _env_json("SLUICE_DIGEST", {"flush_interval_s": 60, "max_keys": 200})

# The channel gate's kill switch: False lets every class send without waiting on a shared channel.
SLUICE_GATE_ENABLED = os.environ.get("SLUICE_GATE_ENABLED", "1") not in ("0", "false", "False")
