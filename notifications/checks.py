"""Django system checks of the face: every channel backend can be built (sluice.E002)."""

from django.core.checks import Error, register
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
