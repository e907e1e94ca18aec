"""Django system checks of the engine: Sluice's settings, its Redis, and the beat schedule that flushes digests.

sluice.E001  a SLUICE_ setting is missing or wrong (SLUICE_REDIS_URL included); the message names it.
sluice.E003  the project's own beat would also run Sluice's periodic tasks, on the project's broker.
sluice.E004  (database) a periodic task Sluice needs is missing or disabled: digests or escalations never go out.
sluice.E007  the broker settings let a redelivered message come back after its "sent" mark expired (sent twice).
sluice.W001  SLUICE_KINDS declares no kinds: notify() accepts nothing.
"""

from django.conf import settings
from django.core.checks import Error, Tags, Warning, register
from django.core.exceptions import ImproperlyConfigured
from django.db import DatabaseError

PLAIN_DATABASE_SCHEDULERS = (
    "django_celery_beat.schedulers:DatabaseScheduler",
    "django_celery_beat.schedulers.DatabaseScheduler",
)
#: The periodic tasks Sluice's data migration creates, by task name.
#: The periodic tasks Sluice cannot do without, and the app whose data migration creates each.
PERIODIC_TASKS = {
    "sluice.digest.flush": "sluice_digest",
    "sluice.overflow.drain": "sluice_digest",
    "sluice.inbox.escalate": "sluice_notifications",
}


@register()
def check_settings(app_configs=None, **kwargs):
    """sluice.E001 for a bad SLUICE_ setting; sluice.E003 for a host beat that would run Sluice's tasks."""
    from .conf import celery_overrides, sluice_settings

    errors = []
    try:
        conf = sluice_settings()
        celery_overrides()
    except ImproperlyConfigured as exc:
        return [Error(str(exc), id="sluice.E001")]
    if not conf.kinds:
        errors.append(
            Warning(
                "SLUICE_KINDS declares no kinds, so notify() accepts none",
                hint="Declare your kinds, e.g. SLUICE_KINDS = {'invoice.paid': {'class': 'routine', "
                "'channels': ['email']}} (docs/integrate.md).",
                id="sluice.W001",
            )
        )
    if getattr(settings, "CELERY_BEAT_SCHEDULER", None) in PLAIN_DATABASE_SCHEDULERS:
        errors.append(
            Error(
                "CELERY_BEAT_SCHEDULER is django-celery-beat's DatabaseScheduler: your project's beat would also "
                "run Sluice's periodic tasks, and publish them to your broker, where no Sluice worker listens",
                hint="Set CELERY_BEAT_SCHEDULER = 'pipeline.beat:HostDatabaseScheduler' (the same scheduler, "
                "without Sluice's tasks); Sluice's own beat is `celery -A pipeline beat`.",
                id="sluice.E003",
            )
        )
    errors.extend(check_mark_lifetime())
    return errors


def check_mark_lifetime():
    """sluice.E007: the redelivery bound (pipeline.marks) passes the marks' longest lifetime, so a message that
    comes back that late finds no mark and is sent again."""
    from . import marks

    bound = marks.redelivery_bound_s()
    if bound <= marks.MAX_LIFETIME_S:
        return []
    terms = marks.bound_terms()
    parts = ", ".join(f"{name} {value:g} s" for name, value in terms.items())
    return [
        Error(
            f"a redelivered message can come back {bound} s after its send ({parts}, plus "
            f'{marks.QUEUE_ALLOWANCE_S} s back in its queue), but a "sent" mark lives at most '
            f"{marks.MAX_LIFETIME_S} s: such a message would be sent twice",
            hint="Lower SLUICE_CELERY['broker_transport_options']['visibility_timeout'] (or 'fetch_dead_after_s', "
            "'unacked_restore_interval' x 'unacked_restore_throttle') until the bound is within "
            f'{marks.MAX_LIFETIME_S} s (docs/reliability.md, "How long a mark lives").',
            id="sluice.E007",
        )
    ]


@register(Tags.database)
def check_periodic_tasks(app_configs=None, databases=None, **kwargs):
    """sluice.E004: the digest flush, the overflow drain and the inbox escalations exist in django-celery-beat's
    tables, enabled."""
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
