"""App config of the engine (label sluice_pipeline): the settings checks, and Sluice's log lines kept to one line."""

from django.apps import AppConfig


class PipelineConfig(AppConfig):
    name = "pipeline"
    label = "sluice_pipeline"
    verbose_name = "Sluice pipeline"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from . import checks  # noqa: F401 - registers the checks
        from .text import install_log_filter

        install_log_filter()
