"""A flush_interval_s changed after the first migrate: check fails naming the fix, migrate and Sluice's beat put the
setting's interval into the schedule, and /metrics reports the interval beat runs, not the setting."""

from importlib import import_module

import pytest
from django.core.management import call_command
from django_celery_beat.models import PeriodicTask

pytestmark = pytest.mark.database


@pytest.fixture
def schedule_at_60(transactional_db, settings):
    """The schedule as the first migrate left it (flush every 60 s). Transactional: beat's scheduler closes the
    database connection between its reads, as a long-running beat must."""
    from django.apps import apps

    settings.SLUICE_DIGEST = {"flush_interval_s": 60, "max_keys": 200}
    import_module("digest.migrations.0001_beat_schedule").create(apps, None)
    # Beat refuses to start without the other periodic tasks Sluice needs: their migrations made them.
    import_module("notifications.migrations.0007_inbox").create(apps, None)
    import_module("notifications.migrations.0010_activity").create(apps, None)
    import_module("notifications.migrations.0011_topics").create(apps, None)
    return settings


def flush_every():
    return PeriodicTask.objects.get(task="sluice.digest.flush").interval.every


def scrape():
    from pipeline.observe.exporter import application

    body = b"".join(application(120)({"PATH_INFO": "/metrics", "REQUEST_METHOD": "GET"}, lambda *a: None))
    return body.decode()


def test_check_fails_while_the_schedule_differs_from_the_setting(schedule_at_60):
    from pipeline.host_checks import check_flush_schedule

    assert check_flush_schedule(databases=["default"]) == []
    schedule_at_60.SLUICE_DIGEST = {"flush_interval_s": 15, "max_keys": 200}
    [error] = check_flush_schedule(databases=["default"])
    assert error.id == "sluice.E006"
    assert "is 15 s but the periodic task 'sluice: digest flush'" in error.msg
    assert "runs every 60 s" in error.msg
    assert "manage.py migrate" in error.hint
    assert check_flush_schedule(databases=None) == []  # a database check: only with --database


def test_migrate_puts_the_setting_into_the_schedule(schedule_at_60):
    from pipeline.host_checks import check_flush_schedule

    schedule_at_60.SLUICE_DIGEST = {"flush_interval_s": 15, "max_keys": 200}
    call_command("migrate", verbosity=0)  # nothing left to apply; its post_migrate brings the schedule in step
    assert flush_every() == 15
    assert check_flush_schedule(databases=["default"]) == []


def test_sluices_beat_runs_the_new_interval_and_metrics_report_it(schedule_at_60, redis_client):
    from pipeline.beat import SluiceScheduler
    from pipeline.celery import app

    assert "\nsluice_digest_flush_interval_seconds " not in scrape()  # no beat has run: no series, not a guess
    schedule_at_60.SLUICE_DIGEST = {"flush_interval_s": 15, "max_keys": 200}
    scheduler = SluiceScheduler(app=app)
    entry = next(e for e in scheduler.schedule.values() if e.task == "sluice.digest.flush")
    assert entry.schedule.run_every.total_seconds() == 15
    assert flush_every() == 15
    assert "\nsluice_digest_flush_interval_seconds 15.0\n" in scrape()


def test_metrics_report_what_beat_runs_even_when_the_setting_says_otherwise(schedule_at_60, redis_client):
    from pipeline.beat import SluiceScheduler
    from pipeline.celery import app

    SluiceScheduler(app=app).schedule  # noqa: B018 - beat reads its schedule, at 60 s
    schedule_at_60.SLUICE_DIGEST = {"flush_interval_s": 15, "max_keys": 200}  # not applied: no migrate, no restart
    assert "\nsluice_digest_flush_interval_seconds 60.0\n" in scrape()


def test_the_stalled_flush_alert_holds_before_it_pages():
    import yaml

    from sluice_tools.processes import ROOT

    rules = yaml.safe_load((ROOT / "monitoring" / "sluice-rules.yml").read_text())["groups"][0]["rules"]
    [stalled] = [rule for rule in rules if rule.get("alert") == "SluiceDigestFlushStalled"]
    assert stalled["for"] == "5m"  # the chart's copy is held to the same by tests/test_monitoring.py
