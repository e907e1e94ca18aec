"""Django system checks: every SLUICE_ setting is valid and every channel backend can be built."""

from django.core.checks import Error, register
from django.core.exceptions import ImproperlyConfigured


@register()
def check_sluice_settings(app_configs=None, **kwargs):
    """Report a bad SLUICE_ setting as sluice.E001, naming it; a backend that fails as sluice.E002."""
    from .channels import get_channel
    from .conf import sluice_settings

    try:
        conf = sluice_settings()
    except ImproperlyConfigured as exc:
        return [Error(str(exc), id="sluice.E001")]
    errors = []
    for name in conf.channels:
        try:
            get_channel(name)
        except Exception as exc:  # noqa: BLE001 - any failure to build a backend is reported
            errors.append(Error(f"SLUICE_CHANNELS['{name}'] backend cannot be built: {exc}", id="sluice.E002"))
    return errors
