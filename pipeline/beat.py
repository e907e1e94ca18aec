"""Beat schedulers that keep Sluice's periodic tasks and a host project's apart in django-celery-beat's tables.

Every DatabaseScheduler reads every enabled PeriodicTask. Sluice's beat must run only Sluice's (the digest
flush and the overflow drain, published to Sluice's Redis); a host's own beat must not also run them, or
it would publish them to the host's broker, where no Sluice worker listens.
"""

from django_celery_beat.schedulers import DatabaseScheduler

SLUICE_TASKS = "sluice."


class SluiceScheduler(DatabaseScheduler):
    """Sluice's beat (`celery -A pipeline beat`): only the periodic tasks whose task is ``sluice.*``; it
    refuses to start without the ones digests depend on."""

    def setup_schedule(self):
        from django.core.checks import Error
        from django.core.exceptions import ImproperlyConfigured

        from .checks import check_periodic_tasks

        problems = [e for e in check_periodic_tasks(databases=["default"]) if isinstance(e, Error)]
        if problems:
            raise ImproperlyConfigured("; ".join(f"{e.msg}: {e.hint}" for e in problems))
        super().setup_schedule()

    def enabled_models_qs(self):
        return super().enabled_models_qs().filter(task__startswith=SLUICE_TASKS)


class HostDatabaseScheduler(DatabaseScheduler):
    """For a host project's own beat: django-celery-beat's scheduler, without Sluice's periodic tasks."""

    def enabled_models_qs(self):
        return super().enabled_models_qs().exclude(task__startswith=SLUICE_TASKS)
