"""The digest flush's periodic task kept in step with SLUICE_DIGEST["flush_interval_s"], and the interval beat runs.

The flush's schedule lives in django-celery-beat's tables, copied there by a migration. A setting copied into the
database would otherwise go stale: `migrate` (post_migrate) and Sluice's beat at its start put the setting's
interval back into the table, `check` fails with sluice.E006 while they differ, and beat records the interval it
actually runs in each fold store's digest stats, where /metrics reads it.
"""

import logging

from django.db import DatabaseError

from pipeline.metrics import BEAT_FLUSH_INTERVAL_FIELD
from pipeline.redis import keys

logger = logging.getLogger("sluice.digest")

FLUSH_TASK = "sluice.digest.flush"


def setting_interval():
    """The flush interval the settings ask for, in seconds."""
    from pipeline.conf import sluice_settings

    return sluice_settings().digest.flush_interval_s


def _flush_task(using):
    """The flush's periodic task when it runs on an interval; None when it is missing, on a crontab (put there on
    purpose: left alone), or the tables are not migrated yet (the migration creates it from the setting)."""
    from django_celery_beat.models import PeriodicTask

    try:
        task = PeriodicTask.objects.using(using).select_related("interval").filter(task=FLUSH_TASK).first()
    except DatabaseError:
        return None
    return task if task is not None and task.interval is not None else None


def scheduled_interval(using="default"):
    """The interval of the flush's periodic task in the database, in seconds (None: see _flush_task)."""
    task = _flush_task(using)
    return None if task is None else task.interval.schedule.run_every.total_seconds()


def sync_flush_interval(using="default"):
    """Put the setting's interval into the flush's periodic task when it differs; return (old, new) seconds when it
    changed something, else None. Saving the task tells every running DatabaseScheduler to reload it."""
    from django_celery_beat.models import IntervalSchedule

    wanted = setting_interval()
    task = _flush_task(using)
    if task is None:
        return None  # missing is sluice.E004
    old = task.interval.schedule.run_every.total_seconds()
    if old == wanted:
        return None
    task.interval, _ = IntervalSchedule.objects.using(using).get_or_create(
        every=wanted, period=IntervalSchedule.SECONDS
    )
    task.save(using=using, update_fields=["interval"])
    logger.info("digest flush schedule: every %g s -> %g s (SLUICE_DIGEST['flush_interval_s'])", old, wanted)
    return old, wanted


def on_post_migrate(sender, using="default", **kwargs):
    """post_migrate receiver: `migrate` after a changed flush_interval_s brings the schedule in step."""
    sync_flush_interval(using)


def record_running_interval(seconds):
    """Beat's side: store the interval it runs the flush at in every fold store's digest stats (the exporter's
    sluice_digest_flush_interval_seconds)."""
    from pipeline.connections import fold_store_classes, get_redis

    for url in fold_store_classes():
        get_redis(url).hset(keys.digest_stats(), BEAT_FLUSH_INTERVAL_FIELD, seconds)


#: The periodic tasks Sluice cannot do without, and the app whose data migration creates each.
PERIODIC_TASKS = {
    "sluice.digest.flush": "sluice_digest",
    "sluice.overflow.drain": "sluice_digest",
    "sluice.inbox.escalate": "sluice_notifications",
    "sluice.activity.drain": "sluice_notifications",
    "sluice.topics.tick": "sluice_notifications",
}


def periodic_task_problems(databases):
    """sluice.E004 errors unless the digest flush, the overflow drain, the inbox escalations and the activity drain
    exist in django-celery-beat's tables of ``databases``, enabled: what `check` reports, and why Sluice's beat refuses
    to start."""
    from django.core.checks import Error
    from django.db import DatabaseError

    if not databases:
        return []
    from django_celery_beat.models import PeriodicTask

    try:
        present = dict(PeriodicTask.objects.filter(task__in=PERIODIC_TASKS).values_list("task", "enabled"))
    except DatabaseError:
        return []  # not migrated yet: migrate creates them
    errors = []
    for task in PERIODIC_TASKS:
        if task not in present:
            problem = "is missing"
            hint = f"Run `manage.py migrate {PERIODIC_TASKS[task]}` (its data migration creates it)."
        elif not present[task]:
            problem, hint = (
                "is disabled",
                "Enable it in the admin (Periodic tasks), or digests or escalations never go out.",
            )
        else:
            continue
        errors.append(Error(f"the periodic task {task!r} {problem}", hint=hint, id="sluice.E004"))
    return errors
