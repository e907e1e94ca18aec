"""A fresh `startproject` host adopts Sluice from its wheel, following docs/integrate.md step by step.

The wheel is built offline, installed into a virtualenv of its own that sees the project's dependencies
(no network), and the host is a new project in a temporary folder. Each trap of a careless integration is
an error that names its fix; with the settings in place, notify() from the host is delivered by a Sluice
worker running under the host's settings, the host's own User admin is intact, and the ingest URL answers.
"""

import json
import subprocess
import textwrap
import time
from pathlib import Path

import pytest

from sluice_tools.processes import ROOT, ManagedProcess
from tests.host_projects import Host, wheel_in_fresh_venv

pytestmark = [pytest.mark.timeout(600)]

HOST_SETTINGS = """
# --- Sluice, as docs/integrate.md says ---
INSTALLED_APPS += ["django_celery_beat", "notifications", "digest", "pipeline", "accounts"]
SLUICE_REDIS_URL = {redis_url!r}
SLUICE_KINDS = {{"invoice.paid": {{"class": "critical", "channels": ["email"]}}}}
SLUICE_CHANNELS = {{"email": {{"backend": "notifications.channels.console.ConsoleChannel"}}}}
"""
HOST_URLS = """
from django.urls import include
urlpatterns += [path("api/", include("notifications.urls"))]
"""
HOST_ADMIN = """
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin
from django_celery_beat.models import PeriodicTask

from notifications.admin import GuardedPeriodicTaskAdmin, NotificationSettingsInline, PreferenceInline

admin.site.unregister(get_user_model())


@admin.register(get_user_model())
class HostUserAdmin(UserAdmin):
    inlines = [*UserAdmin.inlines, PreferenceInline, NotificationSettingsInline]


admin.site.unregister(PeriodicTask)
admin.site.register(PeriodicTask, GuardedPeriodicTaskAdmin)
"""
# The host's own Celery app, on another broker, with its own shared task.
HOST_CELERY = """
from celery import Celery, shared_task

app = Celery("host", broker="memory://")


@shared_task(name="host.ping")
def ping():
    return "pong"
"""


@pytest.fixture(scope="module")
def host(tmp_path_factory, redis_server):
    folder = tmp_path_factory.mktemp("host")
    # 1. The wheel, installed into a virtualenv of its own.
    python, wheel = wheel_in_fresh_venv(folder)
    project = folder / "project"
    project.mkdir()
    subprocess.run([str(python), "-m", "django", "startproject", "host", str(project)], check=True, timeout=60)
    made = Host(project, python)
    made.manage("startapp", "accounts", check=True)
    (project / "accounts" / "admin.py").write_text(HOST_ADMIN)
    (project / "host" / "celery.py").write_text(HOST_CELERY)
    url = redis_server.url.rsplit("/", 1)[0] + "/7"  # a database of its own on the session's Redis
    made.settings.write_text(made.settings.read_text() + HOST_SETTINGS.format(redis_url=url))
    urls = project / "host" / "urls.py"
    urls.write_text(urls.read_text() + HOST_URLS)
    made.redis_url = url
    made.wheel = wheel
    return made


def test_the_wheel_holds_the_apps_their_data_and_no_project(host):
    import zipfile

    names = zipfile.ZipFile(host.wheel).namelist()
    for expected in (
        "pipeline/admission/lua/push_bounded.lua",
        "pipeline/lua/include/depth.lua",
        "pipeline/admission/lua/admit_event.lua",
        "pipeline/lua/token_bucket.lua",
        "notifications/templates/sluice/default.txt",
        "digest/templates/sluice/digest/default.txt",
        "notifications/migrations/0001_initial.py",
        "digest/migrations/0001_beat_schedule.py",
        # What people receive: the email layout, the pages, their styles, and Sluice's Russian, compiled.
        "notifications/templates/sluice/email/base.html",
        "notifications/templates/sluice/pages/preferences.html",
        "notifications/static/sluice/pages/pages.css",
        "notifications/locale/ru/LC_MESSAGES/django.mo",
        "notifications/locale/ru/LC_MESSAGES/django.po",
        "digest/locale/ru/LC_MESSAGES/django.mo",
    ):
        assert expected in names, expected
    assert not [n for n in names if n.startswith(("settings/", "tests/"))]
    location = host.run("-c", "import pipeline, notifications; print(pipeline.__file__)", check=True).stdout
    assert "site-packages" in location
    assert str(ROOT) not in location


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        ("del SLUICE_REDIS_URL", "SLUICE_REDIS_URL is not set"),
        ("SLUICE_CELERY = {'broker_url': 'amqp://guest@localhost//'}", "set SLUICE_REDIS_URL instead"),
        (
            "CELERY_BEAT_SCHEDULER = 'django_celery_beat.schedulers:DatabaseScheduler'",
            "pipeline.beat:HostDatabaseScheduler",
        ),
        ("SLUICE_KINDS = {'invoice.paid': {'class': 'critical', 'channels': ['sms']}}", "SLUICE_CHANNELS: ['sms']"),
        ("SLUICE_CHANNELS = {'email': {'backend': 'nowhere.Backend'}}", "cannot be imported"),
        (
            "SLUICE_CHANNELS = {'email': {'backend': 'notifications.channels.email.EmailChannel'}}",
            "SLUICE_SITE_URL is not set",
        ),
    ],
    ids=[
        "no redis",
        "another broker",
        "host beat runs sluice's tasks",
        "unknown channel",
        "backend missing",
        "emails without a site url",
    ],
)
def test_check_names_each_trap(host, extra, words):
    take_back = host.with_settings(extra)
    try:
        done = host.manage("check")
    finally:
        take_back()
    assert done.returncode != 0
    assert words in done.stderr + done.stdout


def test_the_celery_app_never_guesses_the_settings(host):
    done = host.run("-m", "celery", "-A", "pipeline", "worker", "-Q", "critical", env={"DJANGO_SETTINGS_MODULE": ""})
    assert done.returncode != 0
    assert "set DJANGO_SETTINGS_MODULE" in done.stderr


def test_importing_sluice_changes_nothing_of_the_hosts_celery_app(host):
    done = host.run(
        "-c",
        textwrap.dedent(
            """
            import django; django.setup()
            from kombu.transport import TRANSPORT_ALIASES
            before = dict(TRANSPORT_ALIASES)
            from host.celery import app as host_app
            import celery, pipeline, notifications.delivery.tasks, digest.flush
            from pipeline.celery import app as sluice_app
            print(before == dict(TRANSPORT_ALIASES), celery.current_app.main, "host.ping" in host_app.tasks,
                  type(host_app.connection_for_write().transport).__module__,
                  sluice_app.conf.beat_scheduler, sluice_app.conf.broker_url)
            """
        ),
        check=True,
    )
    same, current, host_task, transport, scheduler, broker = done.stdout.split()
    assert (same, current, host_task) == ("True", "host", "True")
    assert transport == "kombu.transport.memory"
    assert scheduler == "pipeline.beat:SluiceScheduler"  # Sluice's beat is on django-celery-beat's tables
    assert broker == host.redis_url


def test_flower_refuses_to_start_without_a_login(host):
    done = host.manage("flower", "--port=1")
    assert done.returncode != 0
    assert "Flower needs a login" in done.stderr + done.stdout


def test_integrated_host_migrates_notifies_and_a_sluice_worker_delivers(host):
    host.manage("migrate", "-v0", check=True)
    done = host.manage("check", "--database", "default", check=True)
    assert "no issues" in done.stdout
    # The beat schedule is there; without it, check says so.
    take_back = host.with_settings("")
    host.shell(
        "from django_celery_beat.models import PeriodicTask; "
        "PeriodicTask.objects.filter(task='sluice.digest.flush').update(enabled=False)",
        check=True,
    )
    try:
        done = host.manage("check", "--database", "default")
        assert done.returncode != 0
        assert "'sluice.digest.flush' is disabled" in done.stderr
    finally:
        take_back()
        host.shell(
            "from django_celery_beat.models import PeriodicTask; "
            "PeriodicTask.objects.filter(task='sluice.digest.flush').update(enabled=True)",
            check=True,
        )

    worker = ManagedProcess(
        "host-worker",
        [str(host.python), "manage.py", "worker", "critical", "--loglevel=INFO", "--without-mingle", "-c", "1"],
        env={"DJANGO_SETTINGS_MODULE": "host.settings", "PATH": "/usr/bin:/bin"},
        ready_text=" ready.",
    )
    worker.cwd = host.folder
    worker.start()
    try:
        done = host.shell(
            """
            from django.contrib.auth import get_user_model
            from notifications import notify
            user = get_user_model().objects.create_user("hana", email="hana@example.com")
            print(notify(user, "invoice.paid", entity_id="inv-1"))
            """,
            check=True,
        )
        assert done.stdout.strip().splitlines()[-1] == "accepted"
        deadline = time.monotonic() + 30
        while "[email] critical   invoice.paid" not in worker.output() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert "[email] critical   invoice.paid" in worker.output()
    finally:
        worker.stop()


def test_the_hosts_user_admin_is_intact_and_the_ingest_url_answers(host):
    host.manage("migrate", "-v0", check=True)
    done = host.shell(
        """
        import json
        from django.contrib import admin
        from django.contrib.auth import get_user_model
        from django.test import Client
        from django.test.utils import setup_test_environment
        setup_test_environment()
        admin.autodiscover()
        registered = type(admin.site._registry[get_user_model()])
        response = Client().post("/api/notifications/", data="{}", content_type="application/json")
        print(json.dumps([registered.__module__ + "." + registered.__name__, response.status_code,
                          response.json()["error"]]))
        """,
        check=True,
    )
    registered, status, error = json.loads(done.stdout.strip().splitlines()[-1])
    assert registered == "accounts.admin.HostUserAdmin"
    assert (status, error) == (401, "unauthorized")
    assert Path(host.folder / "accounts" / "admin.py").read_text() == HOST_ADMIN
