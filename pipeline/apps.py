"""App config of the engine (label sluice_pipeline): the settings checks, and Sluice's log lines kept to one line."""

from django.apps import AppConfig


class PipelineConfig(AppConfig):
    name = "pipeline"
    label = "sluice_pipeline"
    verbose_name = "Sluice pipeline"
    default_auto_field = "django.db.models.BigAutoField"

    def import_models(self):
        # Before any app's ready(): a host's admin or URLconf importing notifications.admin from a package that
        # shadows Sluice's would fail first with a bare ModuleNotFoundError. Say what is wrong instead.
        from django.core.exceptions import ImproperlyConfigured

        from .host_checks import check_import_names

        for error in check_import_names():
            raise ImproperlyConfigured(f"{error.id}: {error.msg}. {error.hint}")
        super().import_models()

    def ready(self):
        from django.db.models.signals import post_migrate

        from pipeline import checks, host_checks  # noqa: F401 - registers the checks
        from pipeline.broker.beat_schedule import on_post_migrate

        from .text import install_log_filter

        install_log_filter()
        post_migrate.connect(on_post_migrate, dispatch_uid="sluice.beat_schedule.sync")
