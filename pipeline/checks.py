"""Django system checks of the engine: Sluice's settings, its Redis, and the beat schedule that flushes digests.

sluice.E001  a SLUICE_ setting is missing or wrong (SLUICE_REDIS_URL included); the message names it.
sluice.E003  the project's own beat would also run Sluice's periodic tasks, on the project's broker.
sluice.E004  (database) a periodic task Sluice needs is missing or disabled: digests or escalations never go out.
sluice.E007  the broker settings let a redelivered message come back after its "sent" mark expired (sent twice).
sluice.E008  a class with durability "replicated" WAITs on a Redis that refuses WAIT to Sluice's user.
sluice.W001  SLUICE_KINDS declares no kinds: notify() accepts nothing.
sluice.W004  a Redis a replicated class WAITs on could not be asked whether it takes WAIT.
"""

from django.conf import settings
from django.core.checks import Error, Tags, Warning, register
from django.core.exceptions import ImproperlyConfigured
from redis.exceptions import RedisError, ResponseError

PLAIN_DATABASE_SCHEDULERS = (
    "django_celery_beat.schedulers:DatabaseScheduler",
    "django_celery_beat.schedulers.DatabaseScheduler",
)
#: The classes whose events fold (and so WAIT on the digest's Redis, where it is another).
FOLDING_CLASSES = ("routine", "background")


@register()
def check_settings(app_configs=None, **kwargs):
    """sluice.E001 for a bad SLUICE_ setting; sluice.E003 for a host beat that would run Sluice's tasks."""
    from .conf import celery_overrides, sluice_settings
    from .conf.mail import mail_settings

    errors = []
    try:
        conf = sluice_settings()
        celery_overrides()
        mail_settings()
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
    """sluice.E007: the redelivery bound (pipeline.broker.marks) passes the marks' longest lifetime, so a message that
    comes back that late finds no mark and is sent again."""
    from pipeline.broker import marks

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
    tables, enabled (pipeline.broker.beat_schedule, which Sluice's beat asks too)."""
    from .broker.beat_schedule import periodic_task_problems

    return periodic_task_problems(databases)


@register()
def check_wait(app_configs=None, **kwargs):
    """sluice.E008 when a Redis that a replicated class WAITs on refuses WAIT to Sluice's user (every admission of
    the class would then be Unavailable); sluice.W004 when that Redis cannot be asked."""
    from .conf import sluice_settings
    from .connections import get_redis
    from .redis.addresses import describe

    try:
        waited_on = _waited_on(sluice_settings())
    except ImproperlyConfigured:
        return []  # sluice.E001
    found = []
    for url, classes in waited_on.items():
        names = " and ".join(classes)
        try:
            # What admission sends after its script, asking for no replica: it answers at once, or refuses.
            get_redis(url).execute_command("WAIT", 0, 0)
        except ResponseError as exc:
            found.append(
                Error(
                    f"the {names} class(es) have durability 'replicated', but Sluice's user may not run WAIT on the "
                    f"Redis at {describe(url)} ({type(exc).__name__}: {exc}): every write they confirm there would "
                    "fail, and notify() raise Unavailable (ingest 503)",
                    hint="Add +wait to the user's ACL rules (docs/redis.md, 'A Redis ACL user for Sluice': "
                    "pipeline.redis.addresses.acl_rules), or set those classes' durability to 'async'.",
                    id="sluice.E008",
                )
            )
        except RedisError as exc:
            found.append(
                Warning(
                    f"could not ask the Redis at {describe(url)} whether Sluice's user may run WAIT, which the "
                    f"{names} class(es) with durability 'replicated' need ({type(exc).__name__}: {exc})",
                    hint="Run `manage.py check` again where that Redis is reachable.",
                    id="sluice.W004",
                )
            )
    return found


def _waited_on(conf):
    """{URL: the replicated classes that WAIT there}, one URL per Redis: each replicated class's own Redis, and the
    digest's where a replicated class folds (its fold step WAITs there)."""
    from .conf import CLASSES
    from .connections import fold_store_url, folds_elsewhere
    from .redis.addresses import identity

    found = {}
    for klass in CLASSES:
        if not conf.queues[klass].replicated:
            continue
        urls = [conf.queues[klass].redis_url]
        if klass in FOLDING_CLASSES and folds_elsewhere(klass):
            urls.append(fold_store_url(klass))
        for url in urls:
            found.setdefault(identity(url), (url, []))[1].append(klass)
    return dict(found.values())
