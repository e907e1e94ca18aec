"""App config for digest."""

from django.apps import AppConfig


class DigestConfig(AppConfig):
    name = "digest"
    default_auto_field = "django.db.models.BigAutoField"
