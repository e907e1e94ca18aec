"""A realistic monolith adopts Sluice from its wheel, following docs/integrate.md word for word.

The host is built first, as a team would have it before Sluice: `startproject`, a custom user model (UUID primary
key, email as USERNAME_FIELD) with its own UserAdmin, PostgreSQL when DATABASE_URL points there (CI), and its own
Celery app on its own Redis database. Then `pip install dist/django_sluice-*.whl` into a fresh virtualenv, the
settings, URLs, admin and processes of integrate.md (the inbox channel of docs/inbox.md configured, beat and the
routine worker started by `celery -A pipeline`), and: an instant notification delivered, with the recipient's name in
its template; the flush interval changed after the first migrate (check fails naming the fix, Sluice's beat runs the
new interval and /metrics agrees); a digest delivered; an opt-out made on the host's own user page taking effect; an
unread inbox item escalated by email (a UUID user: its escalation once raised TypeError in every drain); the host's
Celery app untouched. The time from the start to the first delivery is printed.
"""

import os
import shutil
import subprocess
import time
import uuid
from urllib.parse import urlsplit

import pytest

from sluice_tools.processes import ROOT
from tests.conftest import wait_for
from tests.host_projects import Host, wheel_in_fresh_venv

pytestmark = pytest.mark.timeout(900)

# --- The monolith as it was before Sluice ---
USER_MODEL = """
import uuid

from django.contrib.auth.base_user import AbstractBaseUser, BaseUserManager
from django.contrib.auth.models import PermissionsMixin
from django.db import models


class UserManager(BaseUserManager):
    use_in_migrations = True

    def create_user(self, email, password=None, **fields):
        user = self.model(email=self.normalize_email(email), **fields)
        user.set_password(password)
        user.save(using=self._db)
        return user

    def create_superuser(self, email, password=None, **fields):
        return self.create_user(email, password, is_staff=True, is_superuser=True, **fields)


class User(AbstractBaseUser, PermissionsMixin):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    email = models.EmailField(unique=True)
    first_name = models.CharField(max_length=150, blank=True)
    is_staff = models.BooleanField(default=False)
    is_active = models.BooleanField(default=True)

    objects = UserManager()

    USERNAME_FIELD = "email"
    EMAIL_FIELD = "email"
"""
USER_ADMIN = """
from django.contrib import admin
from django.contrib.auth.admin import UserAdmin
from django.contrib.auth.forms import BaseUserCreationForm, UserChangeForm

from .models import User


class HostUserCreationForm(BaseUserCreationForm):
    class Meta:
        model = User
        fields = ("email",)


class HostUserChangeForm(UserChangeForm):
    class Meta:
        model = User
        fields = "__all__"


@admin.register(User)
class HostUserAdmin(UserAdmin):
    form = HostUserChangeForm
    add_form = HostUserCreationForm
    ordering = ["email"]
    list_display = ["email", "first_name", "is_staff"]
    search_fields = ["email"]
    fieldsets = (
        (None, {"fields": ("email", "password")}),
        ("Personal", {"fields": ("first_name",)}),
        ("Permissions", {"fields": ("is_active", "is_staff", "is_superuser", "groups", "user_permissions")}),
    )
    add_fieldsets = ((None, {"classes": ("wide",), "fields": ("email", "password1", "password2")}),)
"""
# integrate.md, 5. The admin: Sluice's inlines added to the host's own class, nothing registered again; and the
# guarded periodic task admin.
USER_ADMIN_SLUICE = """
from notifications.admin import NotificationSettingsInline, PreferenceInline

HostUserAdmin.inlines = [*HostUserAdmin.inlines, PreferenceInline, NotificationSettingsInline]

from django_celery_beat.models import PeriodicTask

from notifications.admin import GuardedPeriodicTaskAdmin

admin.site.unregister(PeriodicTask)
admin.site.register(PeriodicTask, GuardedPeriodicTaskAdmin)  # or subclass it, if you customise that admin
"""
HOST_CELERY = """
import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "host.settings")

app = Celery("host")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
"""
HOST_TASKS = """
from celery import shared_task


@shared_task(name="host.ping")
def ping():
    return "pong"
"""
HOST_SETTINGS = """
# --- The host's own: its user model, its database, its Celery app ---
INSTALLED_APPS += ["accounts"]
AUTH_USER_MODEL = "accounts.User"
TEMPLATES[0]["DIRS"] = [BASE_DIR / "templates"]
{database}
CELERY_BROKER_URL = {host_broker!r}
CELERY_RESULT_BACKEND = {host_broker!r}

# --- Sluice, as docs/integrate.md says ---
INSTALLED_APPS += ["django_celery_beat", "notifications", "digest", "pipeline"]
SLUICE_REDIS_URL = {redis_url!r}
SLUICE_KINDS = {{
    "invoice.paid": {{"class": "critical", "channels": ["email"]}},
    "task.comment": {{"class": "routine", "channels": ["email"], "default_mode": "digest"}},
    # docs/inbox.md: to the inbox, and by email once if still unread
    "doc.shared": {{"class": "routine", "channels": ["inbox"], "escalate": {{"after_s": 1, "channels": ["email"]}}}},
}}
SLUICE_CHANNELS = {{
    "email": {{"backend": "notifications.channels.email.EmailChannel"}},
    "inbox": {{"backend": "notifications.inbox.channel.InboxChannel"}},
}}
EMAIL_BACKEND = "django.core.mail.backends.console.EmailBackend"  # the worker prints each email
DEFAULT_FROM_EMAIL = "notifications@example.com"
SLUICE_SITE_URL = "https://app.example.com"  # the emails' unsubscribe and preference links are absolute on it
"""
HOST_URLS = """
from django.urls import include
urlpatterns += [path("api/", include("notifications.urls"))]
"""
TEMPLATES = {
    "sluice/invoice_paid.txt": "Invoice {{ entity_id }} is paid, {{ user.first_name }}\nThank you, {{ user.email }}.",
    "sluice/digest/task_comment.txt": "{{ count }} new comments for {{ user.first_name }}\nOpen the task to read them.",
    "sluice/doc_shared.txt": "Still unread: {{ payload.title }}\nIt was shared with you.",
}
# The first notification's subject in the console email: the recipient's name, loaded by the template.
INSTANT_SUBJECT = "Subject: Invoice inv-1 is paid, Hana"
DIGEST_SUBJECT = "Subject: 3 new comments for Hana"
# The inbox item's escalation, emailed by the worker that `celery -A pipeline worker` started.
ESCALATION_SUBJECT = "Subject: Still unread: Launch plan"


def database_settings(url):
    """The host's DATABASES: PostgreSQL on a database of its own when DATABASE_URL names one (CI), else SQLite."""
    if not url or not url.startswith(("postgres://", "postgresql://")):
        return None, "DATABASES['default']['NAME'] = BASE_DIR / 'host.sqlite3'"
    parts = urlsplit(url)
    name = f"sluice_host_{uuid.uuid4().hex[:8]}"
    conf = {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": name,
        "USER": parts.username or "postgres",
        "PASSWORD": parts.password or "",
        "HOST": parts.hostname or "127.0.0.1",
        "PORT": str(parts.port or 5432),
    }
    return conf, f"DATABASES = {{'default': {conf!r}}}"


def admin_database(conf, statement):
    import psycopg

    with psycopg.connect(
        dbname="postgres", user=conf["USER"], password=conf["PASSWORD"], host=conf["HOST"], port=conf["PORT"]
    ) as connection:
        connection.autocommit = True
        connection.execute(statement)


@pytest.fixture(scope="module")
def host(tmp_path_factory, redis_server):
    started = time.monotonic()
    folder = tmp_path_factory.mktemp("custom-host")
    # `pip install dist/django_sluice-*.whl` into a fresh virtualenv.
    python, _wheel = wheel_in_fresh_venv(folder)

    # The monolith before Sluice.
    project = folder / "project"
    project.mkdir()
    subprocess.run([str(python), "-m", "django", "startproject", "host", str(project)], check=True, timeout=60)
    base = redis_server.url.rsplit("/", 1)[0]
    made = Host(project, python)
    made.manage("startapp", "accounts", check=True)
    (project / "accounts" / "models.py").write_text(USER_MODEL)
    (project / "accounts" / "admin.py").write_text(USER_ADMIN)
    (project / "accounts" / "tasks.py").write_text(HOST_TASKS)
    (project / "host" / "celery.py").write_text(HOST_CELERY)
    init = project / "host" / "__init__.py"
    init.write_text(init.read_text() + "from .celery import app as celery_app  # noqa: F401\n")
    database, database_line = database_settings(os.environ.get("DATABASE_URL"))
    if database:
        admin_database(database, f'CREATE DATABASE "{database["NAME"]}"')
    made.settings.write_text(
        made.settings.read_text()
        + HOST_SETTINGS.format(database=database_line, host_broker=f"{base}/10", redis_url=f"{base}/9")
    )
    # integrate.md: URLs, the admin's inlines, the templates.
    urls = project / "host" / "urls.py"
    urls.write_text(urls.read_text() + HOST_URLS)
    (project / "accounts" / "admin.py").write_text(USER_ADMIN + USER_ADMIN_SLUICE)
    for name, text in TEMPLATES.items():
        (project / "templates" / name).parent.mkdir(parents=True, exist_ok=True)
        (project / "templates" / name).write_text(text)
    (project / "browser.py").write_text((ROOT / "tests" / "admin_forms.py").read_text())
    made.manage("makemigrations", "accounts", "-v0", check=True)
    made.started, made.database, made.sluice_redis = started, database, f"{base}/9"
    yield made
    if database:
        admin_database(database, f'DROP DATABASE IF EXISTS "{database["NAME"]}" WITH (FORCE)')


def test_a_host_with_its_own_notifications_app_is_told_what_shadows_sluice(host):
    shadow = host.folder / "notifications"
    shadow.mkdir()
    (shadow / "__init__.py").write_text("")
    (shadow / "apps.py").write_text(
        "from django.apps import AppConfig\n\n\nclass NotificationsConfig(AppConfig):\n    name = 'notifications'\n"
    )
    try:
        done = host.manage("check")
    finally:
        shutil.rmtree(shadow)
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert f"sluice.E005: the import name 'notifications' resolves to {shadow}, not to Sluice's" in last
    assert "Rename your package 'notifications'" in last
    print(f"\nthe shadowing check: {last}")


def test_from_startproject_to_an_instant_a_digest_and_an_opt_out(host):
    host.manage("migrate", "-v0", check=True)
    assert "no issues" in host.manage("check", "--database", "default", check=True).stdout
    if host.database:
        assert host.answer("from django.db import connection; import json; print(json.dumps(connection.vendor))") == (
            "postgresql"
        )
    hana = host.answer(
        """
        import json
        from django.contrib.auth import get_user_model
        User = get_user_model()
        hana = User.objects.create_user("hana@example.com", first_name="Hana")
        User.objects.create_superuser("ops@example.com", "pw")
        print(json.dumps(str(hana.pk)))
        """
    )
    critical = host.process("critical", "manage.py", "worker", "critical", "--without-mingle", "-c", "1",
                            ready_text=" ready.")  # fmt: skip
    # integrate.md, 7: `celery -A pipeline worker -Q routine` works as well as `manage.py worker routine`.
    routine = host.process("routine", "-m", "celery", "-A", "pipeline", "worker", "-Q", "routine", "--pool", "threads",
                           "-c", "2", "--loglevel", "INFO", "--without-mingle", ready_text=" ready.")  # fmt: skip
    processes = [critical, routine]
    try:
        for started in processes:
            started.start()
        # 1. An instant notification, with the recipient's name from the host's custom user model.
        outcome = host.answer(
            f"""
            import json
            from django.contrib.auth import get_user_model
            from notifications import notify
            print(json.dumps(notify(get_user_model().objects.get(pk="{hana}"), "invoice.paid", entity_id="inv-1")))
            """
        )
        assert outcome == "accepted"
        assert wait_for(lambda: INSTANT_SUBJECT in critical.output(), timeout=60), critical.output()[-3000:]
        first_delivery = time.monotonic() - host.started
        print(f"\nfrom the start (wheel build included) to the first delivery: {first_delivery:.1f} s")
        assert "To: hana@example.com" in critical.output()

        # 2. flush_interval_s changed after the first migrate: check fails naming the fix ...
        host.settings.write_text(host.settings.read_text() + 'SLUICE_DIGEST = {"flush_interval_s": 2}\n')
        done = host.manage("check", "--database", "default")
        assert done.returncode != 0
        assert "sluice.E006" in done.stderr
        assert "SLUICE_DIGEST['flush_interval_s'] is 2 s but the periodic task 'sluice: digest flush'" in done.stderr
        assert "runs every 60 s" in done.stderr
        assert "manage.py migrate" in done.stderr
        # ... and Sluice's beat, started as integrate.md says, runs the setting's interval, which /metrics reports.
        beat = host.process("beat", "-m", "celery", "-A", "pipeline", "beat", "--loglevel", "INFO",
                            ready_text="beat: Starting")  # fmt: skip
        processes.append(beat)
        beat.start()
        assert wait_for(lambda: critical.output().count("flush (beat)") >= 2, timeout=60), beat.output()[-3000:]
        assert "no issues" in host.manage("check", "--database", "default", check=True).stdout
        scraped = host.answer(
            """
            import json
            from pipeline.observe.exporter import application
            body = b"".join(application(120)({"PATH_INFO": "/metrics", "REQUEST_METHOD": "GET"}, lambda *a: None))
            print(json.dumps([line for line in body.decode().splitlines()
                              if line.startswith("sluice_digest_flush_interval_seconds ")]))
            """
        )
        assert scraped == ["sluice_digest_flush_interval_seconds 2.0"]

        # 3. A digest: three comments fold, beat's next flush sends one email.
        outcomes = host.answer(
            f"""
            import json
            from django.contrib.auth import get_user_model
            from notifications import notify
            hana = get_user_model().objects.get(pk="{hana}")
            print(json.dumps([notify(hana, "task.comment", entity_id="task-7") for _ in range(3)]))
            """
        )
        assert outcomes == ["folded"] * 3
        # Beat's next tick (every 2 s), the flush in the critical pool, then the routine worker's send: seconds
        # alone, over a minute once on CI's two loaded cores; what each process said is shown if it never comes.
        wait_for(
            lambda: DIGEST_SUBJECT in routine.output(),
            timeout=180,
            what=lambda: f"the digest; critical: {critical.output()[-2000:]}\nroutine: {routine.output()[-2000:]}",
        )

        # 4. The opt-out, on the host's own user page (its UserAdmin, with Sluice's inlines added).
        status = host.answer(
            f"""
            import json
            from django.contrib.auth import get_user_model
            from django.test import Client
            from django.test.utils import setup_test_environment
            from browser import form_fields, with_fields
            setup_test_environment()
            client = Client()
            client.force_login(get_user_model().objects.get(email="ops@example.com"))
            url = "/admin/accounts/user/{hana}/change/"
            page = client.get(url).content.decode()
            fields = form_fields(page, "user_form")
            prefix = "notification_preferences"
            total = int(dict(fields)[prefix + "-TOTAL_FORMS"])
            row = {{f"{{prefix}}-{{total}}-kind": "task.comment", f"{{prefix}}-{{total}}-mode": "off"}}
            response = client.post(url, with_fields(fields, **{{prefix + "-TOTAL_FORMS": str(total + 1)}}, **row))
            print(json.dumps([response.status_code, "Notification preferences" in page]))
            """
        )
        assert status == [302, True]  # saved, and redirected to the list
        flushes = critical.output().count("flush (beat)")
        outcome = host.answer(
            f"""
            import json
            from django.contrib.auth import get_user_model
            from notifications import notify
            print(json.dumps(notify(get_user_model().objects.get(pk="{hana}"), "task.comment", entity_id="task-8")))
            """
        )
        assert outcome == "suppressed"
        # Two more of beat's flushes, and still one digest: nothing of the opted-out kind went out.
        assert wait_for(lambda: critical.output().count("flush (beat)") >= flushes + 2, timeout=60)
        assert routine.output().count("Subject: ") == 1

        # 5. The inbox, as docs/inbox.md configures it: an item still unread a second later is emailed once, by beat's
        # escalation tick and the routine pool's step (both started by `celery -A pipeline`).
        outcome = host.answer(
            f"""
            import json
            from notifications import notify
            print(json.dumps(notify("{hana}", "doc.shared", entity_id="doc-1", payload={{"title": "Launch plan"}})))
            """
        )
        assert outcome == "accepted"
        wait_for(
            lambda: ESCALATION_SUBJECT in routine.output(),
            timeout=120,
            what=lambda: f"the escalation; beat: {beat.output()[-2000:]}\nroutine: {routine.output()[-3000:]}",
        )
        assert "AppRegistryNotReady" not in beat.output() + routine.output()
    finally:
        for started in reversed(processes):
            started.stop()


def test_the_hosts_celery_app_runs_its_own_tasks_on_its_own_broker(host):
    worker = host.process("own-worker", "-m", "celery", "-A", "host", "worker", "--loglevel", "INFO", "-c", "1",
                          "--without-mingle", ready_text=" ready.")  # fmt: skip
    worker.start()
    try:
        answer = host.answer(
            """
            import json
            from accounts.tasks import ping
            from host.celery import app
            print(json.dumps([ping.delay().get(timeout=60), app.conf.broker_url]))
            """
        )
    finally:
        worker.stop()
    assert answer[0] == "pong"
    assert answer[1].endswith("/10")  # the host's broker, not Sluice's Redis database (9)
    # integrate.md, 8: Sluice's tasks are its own app's, never shared into the host's, so its worker does not list them.
    assert "sluice.send.critical" not in worker.output()


def test_what_the_host_writes_is_integrate_md_word_for_word():
    guide = (ROOT / "docs" / "integrate.md").read_text()
    written = [USER_ADMIN_SLUICE, HOST_URLS.replace("urlpatterns += [", "    "), *HOST_SETTINGS.splitlines()[-3:]]
    lines = [line.strip() for text in written for line in text.splitlines()]
    quoted = [line for line in lines if line and not line.startswith(("#", "SLUICE_", "}", "from django.urls"))]
    missing = [line for line in quoted if line.rstrip("],") not in guide]
    assert not missing
    assert "celery -A pipeline beat --loglevel INFO" in guide
    assert 'path("api/", include("notifications.urls"))' in guide
