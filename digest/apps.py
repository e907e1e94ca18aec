"""App config of the digest (label sluice_digest): its beat schedule's migration, and its tasks declared at ready()."""

from django.apps import AppConfig


class DigestConfig(AppConfig):
    name = "digest"
    label = "sluice_digest"
    verbose_name = "Sluice digest"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from digest import flush  # noqa: F401 - declares the flush and overflow drain tasks with Sluice's Celery app
