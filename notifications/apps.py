"""App config of Sluice's face (label sluice_notifications): checks, the preferences' Redis mirror, tracking, tasks."""

from django.apps import AppConfig


class NotificationsConfig(AppConfig):
    name = "notifications"
    # "notifications" is one of the commonest app labels in Django projects; Sluice's cannot clash with it.
    label = "sluice_notifications"
    verbose_name = "Sluice notifications"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from anymail.signals import tracking as anymail_tracking
        from django.core.checks import register

        from digest.signals import flush_started

        # Imported for what they register: checks, signal receivers, and the send and prune tasks of Sluice's
        # Celery app (declared here by the app that owns them, never discovered by name).
        from notifications import checks, host_checks, preferences  # noqa: F401
        from notifications.activity import tasks as activity_tasks  # noqa: F401
        from notifications.delivery import tasks, tracking  # noqa: F401
        from notifications.delivery.tracking_checks import check_tracking_webhooks
        from notifications.inbox import tasks as inbox_tasks  # noqa: F401
        from notifications.scheduling import runner as scheduling
        from notifications.topics import tasks as topic_tasks  # noqa: F401
        from pipeline.beat import beat_ready

        register(check_tracking_webhooks)

        flush_started.connect(preferences.rebuild_mirror, dispatch_uid="sluice.preferences.rebuild_mirror")
        # Sluice's beat runs the scheduled sends' movers: one thread a class, under a lease per class.
        beat_ready.connect(scheduling.start, dispatch_uid="sluice.scheduling.movers")
        # anymail's webhooks (notifications.urls) report delivery, bounces and complaints through this signal.
        anymail_tracking.connect(tracking.on_tracking, dispatch_uid="sluice.delivery.tracking")
