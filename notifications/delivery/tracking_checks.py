"""System check of the ESPs' tracking webhooks Sluice mounts (notifications.delivery.esp_webhooks).

sluice.E020  a provider's ESP has its tracking webhook mounted, and nothing authenticates it: no
             ANYMAIL["WEBHOOK_SECRET"], or no signing key for an ESP that signs its webhooks.
"""

from django.core.checks import Error
from django.core.exceptions import ImproperlyConfigured


def check_tracking_webhooks(app_configs=None, **kwargs):
    """sluice.E020 for each mounted tracking webhook that would accept forged events (the view refuses them too)."""
    from notifications.delivery.esp_webhooks import refusal, used_esps

    try:
        esps = used_esps()
    except ImproperlyConfigured:
        return []  # reported by the engine's check as sluice.E001
    errors = []
    for esp, senders in sorted(esps.items()):
        reason = refusal(esp)
        if reason is not None:
            providers = ", ".join(f"{channel}/{provider}" for channel, provider in sorted(senders))
            errors.append(
                Error(
                    f"the {esp} tracking webhook (anymail/{esp}/tracking/, for {providers}) is not authenticated: "
                    f"{reason}; it refuses every event until it is",
                    hint="Set ANYMAIL['WEBHOOK_SECRET'] (in Sluice's own settings: the ANYMAIL_WEBHOOK_SECRET "
                    "environment variable) and the ESP's signing key where it signs its webhooks (docs/providers.md).",
                    id="sluice.E020",
                )
            )
    return errors
