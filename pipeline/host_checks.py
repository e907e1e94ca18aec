"""Django system checks of how Sluice sits in the host project: its import names, and its beat schedule.

sluice.E005  one of the import names notifications, digest, pipeline resolves to a package that is not Sluice's.
sluice.E006  (database) the digest flush's periodic task runs at another interval than SLUICE_DIGEST's.
"""

import importlib
import importlib.util

from django.apps import AppConfig
from django.core.checks import Error, Tags, register

#: Sluice's top-level packages, each an app labelled sluice_<name>.
IMPORT_NAMES = ("notifications", "digest", "pipeline")
#: Other projects known to use the same import names.
KNOWN_CLASHES = {"notifications": "django-notifications-hq", "pipeline": "django-pipeline"}


def _is_sluices(name):
    """Whether the import name ``name`` resolves to Sluice's package: its apps module holds Sluice's AppConfig."""
    try:
        module = importlib.import_module(f"{name}.apps")
    except ImportError:
        return False
    return any(
        isinstance(value, type) and issubclass(value, AppConfig) and getattr(value, "label", None) == f"sluice_{name}"
        for value in vars(module).values()
    )


@register()
def check_import_names(app_configs=None, **kwargs):
    """sluice.E005: an app or package of the host (or another project) shadows one of Sluice's import names."""
    errors = []
    for name in IMPORT_NAMES:
        if _is_sluices(name):
            continue
        spec = importlib.util.find_spec(name)
        where = ", ".join(spec.submodule_search_locations or [spec.origin or "?"]) if spec else "nothing"
        other = f", or {KNOWN_CLASHES[name]}, which installs a package of that name" if name in KNOWN_CLASHES else ""
        errors.append(
            Error(
                f"the import name {name!r} resolves to {where}, not to Sluice's {name} package: a package of the "
                f"same name comes first on sys.path (your project's own app{other}). Sluice's apps are the "
                "top-level packages notifications, digest and pipeline",
                hint=f"Rename your package {name!r} (and its INSTALLED_APPS entry), or uninstall the project that "
                "installs it: Sluice cannot run beside it (docs/integrate.md, 'Import names').",
                id="sluice.E005",
            )
        )
    return errors


@register(Tags.database)
def check_flush_schedule(app_configs=None, databases=None, **kwargs):
    """sluice.E006: the flush's periodic task is out of step with SLUICE_DIGEST['flush_interval_s']."""
    if not databases:
        return []
    from django.core.exceptions import ImproperlyConfigured

    from pipeline.broker.beat_schedule import scheduled_interval, setting_interval

    try:
        wanted = setting_interval()
    except ImproperlyConfigured:
        return []  # sluice.E001
    errors = []
    for alias in databases:
        running = scheduled_interval(alias)
        if running is not None and running != wanted:
            errors.append(
                Error(
                    f"SLUICE_DIGEST['flush_interval_s'] is {wanted:g} s but the periodic task 'sluice: digest "
                    f"flush' in database {alias!r} runs every {running:g} s",
                    hint="Run `manage.py migrate` (it puts the setting's interval into the schedule), or restart "
                    "Sluice's beat (it does the same when it starts); change the interval in the setting, not in "
                    "the admin.",
                    id="sluice.E006",
                )
            )
    return errors
