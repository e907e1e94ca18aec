"""App config for the digest: connects the opt-out mirror."""

from django.apps import AppConfig


class DigestConfig(AppConfig):
    name = "digest"
    verbose_name = "Digest"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from . import preferences  # noqa: F401 - connects the signal receivers
