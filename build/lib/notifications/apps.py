"""App config of Sluice's face (label sluice_notifications): checks, and the preferences' Redis mirror."""

from django.apps import AppConfig


class NotificationsConfig(AppConfig):
    name = "notifications"
    # "notifications" is one of the commonest app labels in Django projects; Sluice's cannot clash with it.
    label = "sluice_notifications"
    verbose_name = "Sluice notifications"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from digest.signals import flush_started

        from . import checks, preferences  # noqa: F401 - registers the checks and the mirror's receivers

        flush_started.connect(preferences.rebuild_mirror, dispatch_uid="sluice.preferences.rebuild_mirror")
