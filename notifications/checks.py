"""Django system checks of the face.

sluice.E002  a channel backend cannot be built.
sluice.E021  an email channel sends kinds that are not mandatory, and SLUICE_SITE_URL is not set.
sluice.E022  an email channel sends kinds that are not mandatory, and the URLconf does not include notifications.urls.
sluice.W002  the registered periodic task admin lets view-only staff pause or run Sluice's tasks.
"""

from django.core.checks import Error, Tags, Warning, register
from django.core.exceptions import ImproperlyConfigured


@register()
def check_channels(app_configs=None, **kwargs):
    """Report a channel backend that fails to build as sluice.E002, naming the channel."""
    from pipeline.conf import sluice_settings

    from .channels import get_channel, get_provider

    try:
        conf = sluice_settings()
    except ImproperlyConfigured:
        return []  # reported by the engine's check as sluice.E001
    errors = []
    for name, channel in conf.channels.items():
        if not channel.providers:
            try:
                get_channel(name)
            except Exception as exc:  # noqa: BLE001 - any failure to build a backend is reported
                errors.append(Error(f"SLUICE_CHANNELS['{name}'] backend cannot be built: {exc}", id="sluice.E002"))
        for provider in channel.providers:
            try:
                get_provider(name, provider.name)
            except Exception as exc:  # noqa: BLE001 - the same for each provider
                errors.append(
                    Error(
                        f"SLUICE_CHANNELS['{name}'] provider {provider.name!r} cannot be built: {exc}", id="sluice.E002"
                    )
                )
    return errors


@register()
def check_email_links(app_configs=None, **kwargs):
    """sluice.E021 and E022: every email of a kind that is not mandatory carries a one-click unsubscribe link and a
    link to the preference page, absolute on SLUICE_SITE_URL (workers have no request), served by notifications.urls."""
    from pipeline.conf import sluice_settings
    from pipeline.conf.mail import mail_settings

    from .channels import sends_html
    from .unsubscribe_links import path_of

    try:
        conf, mail = sluice_settings(), mail_settings()
        email = {name for name in conf.channels if sends_html(name)}
    except (ImproperlyConfigured, ImportError):
        return []  # a bad setting is sluice.E001, a backend that does not import sluice.E002
    sending = sorted(
        kind.name
        for kind in conf.kinds.values()
        if not kind.mandatory and email & {*kind.channels, *(kind.escalate[1] if kind.escalate else ())}
    )
    if not sending:
        return []
    listed = ", ".join(sending[:3]) + (", ..." if len(sending) > 3 else "")
    if not mail.site_url:
        return [
            Error(
                f"SLUICE_SITE_URL is not set, and emails of kinds that are not mandatory ({listed}) need it: their "
                "one-click unsubscribe link and the link to the preference page are absolute",
                hint="Set SLUICE_SITE_URL to the address people reach your site at, e.g. "
                "SLUICE_SITE_URL = 'https://app.example.com' (docs/email.md).",
                id="sluice.E021",
            )
        ]
    if not path_of("sluice:unsubscribe", "x"):
        return [
            Error(
                f"the URLconf does not include notifications.urls, and emails of kinds that are not mandatory "
                f"({listed}) link to its unsubscribe and preference pages",
                hint="Add path('api/', include('notifications.urls')) to your urlpatterns (docs/integrate.md).",
                id="sluice.E022",
            )
        ]
    return []


@register(Tags.admin)
def check_periodic_task_admin(app_configs=None, **kwargs):
    """sluice.W002: an admin site's PeriodicTask admin runs enable/disable/toggle/run on Sluice's tasks for staff
    who may only view them (django-celery-beat's own admin does)."""
    from django.contrib.admin.sites import all_sites
    from django.urls import get_resolver
    from django_celery_beat.models import PeriodicTask

    from .beat_admin import GUARDED_ACTIONS

    try:
        get_resolver().url_patterns  # noqa: B018 - a project may register its admins in its URLconf
    except Exception:  # noqa: BLE001 - a broken URLconf is Django's own check to report
        return []
    warnings = []
    for site in all_sites:
        model_admin = site._registry.get(PeriodicTask)
        if model_admin is None:
            continue
        open_actions = [
            name
            for name in GUARDED_ACTIONS
            if name in (model_admin.actions or ())
            and not getattr(getattr(type(model_admin), name, None), "sluice_guarded", False)
            and "change" not in getattr(getattr(type(model_admin), name, None), "allowed_permissions", ())
        ]
        if open_actions:
            warnings.append(
                Warning(
                    f"the periodic task admin of admin site {site.name!r} ({type(model_admin).__qualname__}) lets "
                    f"staff who may only view periodic tasks run {', '.join(open_actions)} on Sluice's digest flush "
                    "and overflow drain",
                    hint="Register notifications.admin.GuardedPeriodicTaskAdmin for django_celery_beat's "
                    "PeriodicTask instead (docs/integrate.md, 'The admin').",
                    obj=model_admin,
                    id="sluice.W002",
                )
            )
    return warnings
