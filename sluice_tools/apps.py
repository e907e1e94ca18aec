"""App config for Sluice's tooling: its management commands (bench, demo, simulate_autoscale)."""

from django.apps import AppConfig


class SluiceToolsConfig(AppConfig):
    name = "sluice_tools"
    label = "sluice_tools"
    verbose_name = "Sluice tooling"
