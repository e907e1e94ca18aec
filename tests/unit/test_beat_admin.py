"""django-celery-beat's admin actions on Sluice's periodic tasks need the change permission (sluice.W002 otherwise)."""

from importlib import import_module

import pytest
from django.contrib import admin
from django_celery_beat.admin import PeriodicTaskAdmin
from django_celery_beat.models import IntervalSchedule, PeriodicTask

URL = "/admin/django_celery_beat/periodictask/"
SLUICE = ("sluice.digest.flush", "sluice.overflow.drain")


def enabled():
    return dict(PeriodicTask.objects.filter(task__in=SLUICE).values_list("task", "enabled"))


@pytest.fixture
def sluice_tasks(db):
    """The two periodic tasks Sluice's data migration makes (made again if a transactional test emptied the tables)."""
    from django.apps import apps

    import_module("digest.migrations.0001_beat_schedule").create(apps, None)
    assert enabled() == dict.fromkeys(SLUICE, True)
    return list(PeriodicTask.objects.filter(task__in=SLUICE).values_list("pk", flat=True))


@pytest.mark.parametrize("action", ["disable_tasks", "toggle_tasks"])
def test_view_only_staff_cannot_pause_the_flush_or_the_drain(client, staff, sluice_tasks, action):
    client.force_login(staff("viewer", "view_periodictask"))
    response = client.post(URL, {"action": action, "_selected_action": sluice_tasks}, follow=True)
    assert response.status_code == 200
    assert enabled() == dict.fromkeys(SLUICE, True)
    assert "need the change permission" in response.content.decode()


def test_view_only_staff_cannot_run_or_enable_them_either(client, staff, sluice_tasks):
    PeriodicTask.objects.filter(task__in=SLUICE).update(enabled=False)
    client.force_login(staff("viewer", "view_periodictask"))
    for action in ("enable_tasks", "run_tasks"):
        response = client.post(URL, {"action": action, "_selected_action": sluice_tasks}, follow=True)
        assert "need the change permission" in response.content.decode()
    assert enabled() == dict.fromkeys(SLUICE, False)


def test_staff_with_change_permission_still_can(client, staff, sluice_tasks):
    client.force_login(staff("operator", "view_periodictask", "change_periodictask"))
    client.post(URL, {"action": "disable_tasks", "_selected_action": sluice_tasks})
    assert enabled() == dict.fromkeys(SLUICE, False)
    client.post(URL, {"action": "enable_tasks", "_selected_action": sluice_tasks})
    assert enabled() == dict.fromkeys(SLUICE, True)


def test_the_hosts_own_tasks_keep_django_celery_beats_rules(client, staff, sluice_tasks):
    every = IntervalSchedule.objects.create(every=60, period="seconds")
    theirs = PeriodicTask.objects.create(name="host: cleanup", task="host.cleanup", interval=every)
    client.force_login(staff("viewer", "view_periodictask"))
    client.post(URL, {"action": "disable_tasks", "_selected_action": [theirs.pk]})
    theirs.refresh_from_db()
    assert not theirs.enabled  # unchanged behaviour for what is not Sluice's
    assert enabled() == dict.fromkeys(SLUICE, True)


def test_check_warns_while_the_registered_admin_leaves_sluices_tasks_open(db):
    from notifications.admin import GuardedPeriodicTaskAdmin
    from notifications.checks import check_periodic_task_admin

    assert check_periodic_task_admin() == []  # Sluice's own project registers the guarded admin
    site = admin.AdminSite(name="host")
    site.register(PeriodicTask, PeriodicTaskAdmin)
    try:
        (warning,) = check_periodic_task_admin()
        assert warning.id == "sluice.W002"
        assert "enable_tasks, disable_tasks, toggle_tasks, run_tasks" in warning.msg
        site.unregister(PeriodicTask)
        site.register(PeriodicTask, GuardedPeriodicTaskAdmin)
        assert check_periodic_task_admin() == []
    finally:
        # A site lives on in admin.sites.all_sites until collected: leave it with nothing registered.
        site.unregister(PeriodicTask)
