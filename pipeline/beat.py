"""Beat schedulers that keep Sluice's periodic tasks and a host project's apart in django-celery-beat's tables.

Every DatabaseScheduler reads every enabled PeriodicTask. Sluice's beat must run only Sluice's (the digest
flush and the overflow drain, published to Sluice's Redis); a host's own beat must not also run them, or
it would publish them to the host's broker, where no Sluice worker listens.
"""

from django.dispatch import Signal
from django_celery_beat.schedulers import DatabaseScheduler

SLUICE_TASKS = "sluice."

#: Sent as Sluice's beat service starts (Celery's beat_init for Sluice's app, pipeline.celery): the scheduled sends'
#: movers start in this process (notifications.scheduling.runner). The engine cannot import the face: the face listens.
beat_ready = Signal()


class SluiceScheduler(DatabaseScheduler):
    """Sluice's beat (`celery -A pipeline beat`): only the periodic tasks whose task is ``sluice.*``; it
    refuses to start without the ones digests depend on."""

    def setup_schedule(self):
        from django.core.checks import Error
        from django.core.exceptions import ImproperlyConfigured

        from pipeline.broker.beat_schedule import periodic_task_problems, sync_flush_interval

        # A flush_interval_s changed since the last migrate: run at the setting's interval, not the stale copy.
        sync_flush_interval()
        problems = [e for e in periodic_task_problems(["default"]) if isinstance(e, Error)]
        if problems:
            raise ImproperlyConfigured("; ".join(f"{e.msg}: {e.hint}" for e in problems))
        super().setup_schedule()

    def all_as_schedule(self):
        from pipeline.broker.beat_schedule import FLUSH_TASK, record_running_interval

        schedule = super().all_as_schedule()
        for entry in schedule.values():
            run_every = getattr(entry.schedule, "run_every", None)
            if entry.task == FLUSH_TASK and run_every is not None:
                record_running_interval(run_every.total_seconds())  # what /metrics reports
        return schedule

    def enabled_models_qs(self):
        return super().enabled_models_qs().filter(task__startswith=SLUICE_TASKS)


class HostDatabaseScheduler(DatabaseScheduler):
    """For a host project's own beat: django-celery-beat's scheduler, without Sluice's periodic tasks."""

    def enabled_models_qs(self):
        return super().enabled_models_qs().exclude(task__startswith=SLUICE_TASKS)
