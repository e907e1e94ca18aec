"""`celery -A pipeline worker|inspect` start with the inbox channel configured, as docs/inbox.md shows it.

Celery reads its configuration (beat_schedule_filename, say) before Django loads its apps, and the inbox channel's
module imports a model: resolving SLUICE_CHANNELS imported it and every one of these commands died with
AppRegistryNotReady. (Beat, which also needs a migrated database, is started the same way by the host project's
system test, tests/system/test_host_custom_user.py.)
"""

import json
import socket
import subprocess
import sys

import pytest

from sluice_tools.processes import ROOT, WorkerProcess

pytestmark = pytest.mark.timeout(120)

CHANNELS = {
    **{name: {"backend": "notifications.channels.locmem.LocmemChannel"} for name in ("email", "sms", "push")},
    "inbox": {"backend": "notifications.inbox.channel.InboxChannel"},
}


def celery(*args, redis_url):
    return subprocess.run(
        [sys.executable, "-m", "celery", "-A", "pipeline", *args],
        cwd=ROOT,
        env={
            "PATH": "/usr/bin:/bin",
            "PYTHONPATH": str(ROOT),
            "DJANGO_SETTINGS_MODULE": "tests.settings",
            "REDIS_URL": redis_url,
            "SLUICE_CHANNELS": json.dumps(CHANNELS),
        },
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_plain_celery_worker_starts_and_answers_inspect_with_the_inbox_configured(redis_server):
    worker = WorkerProcess("critical", redis_server.url, channels=CHANNELS, plain_celery=True)
    worker.start()
    try:
        # To this one worker: the answer comes as soon as it replies, not after the whole timeout.
        done = celery(
            "inspect", "ping", "-d", f"celery@{socket.gethostname()}", "--timeout", "10", redis_url=redis_server.url
        )
    finally:
        worker.stop()
    assert "AppRegistryNotReady" not in done.stderr + worker.output()
    assert done.returncode == 0, done.stderr
    assert "pong" in done.stdout


def test_a_backend_that_does_not_import_is_still_refused_before_the_apps_load(redis_server, tmp_path):
    channels = {**CHANNELS, "inbox": {"backend": "notifications.inbox.no_such_module.InboxChannel"}}
    done = subprocess.run(
        [sys.executable, "-c", "import pipeline; pipeline.app.conf.beat_schedule_filename"],
        cwd=tmp_path,
        env={
            "PATH": "/usr/bin:/bin",
            "PYTHONPATH": str(ROOT),
            "DJANGO_SETTINGS_MODULE": "tests.settings",
            "REDIS_URL": redis_server.url,
            "SLUICE_CHANNELS": json.dumps(channels),
        },
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert last == (
        "django.core.exceptions.ImproperlyConfigured: SLUICE_CHANNELS['inbox']['backend'] cannot be imported: "
        "No module named 'notifications.inbox.no_such_module'"
    )
