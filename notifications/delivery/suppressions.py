"""The suppression list: addresses that bounced hard or complained, which the email channels no longer send to."""

from notifications.delivery.models import Suppression
from pipeline import metrics

DETAIL_CHARS = 300


def suppress(address, reason, provider="", notification_id="", detail=""):
    """Add ``address`` to the list; return True when it was not there yet (and count it)."""
    address = Suppression.normalize(address)
    if "@" not in address:
        return False
    _row, created = Suppression.objects.get_or_create(
        address=address,
        defaults={
            "reason": reason,
            "provider": provider[:50],
            "notification_id": notification_id[:64],
            "detail": clean(detail),
        },
    )
    if created:
        metrics.count(metrics.suppression_field(reason))
    return created


def clean(text, limit=DETAIL_CHARS):
    """Text from a provider, fit for a record: one line, printable, bounded."""
    text = "".join(c if c.isprintable() else " " for c in str(text or ""))
    return text[:limit]
