"""Anymail's tracking signal into delivery status records: delivered, bounced, complained, failed, opened.

Anymail's own webhook views authenticate the ESP (basic auth, or the ESP's signature where it signs) and normalize
its events; Sluice only listens to the signal. The metadata the email channel sent (sluice_id, sluice_channel) ties
an event to its record; without it, the ESP's message id does. Only the records of the providers that send through
the event's ESP may match, and each event is counted in sluice_tracking_events_total{provider, result}.
"""

from notifications.delivery.esp_webhooks import esp_of_view, used_esps
from notifications.delivery.records import StatusEvent, apply
from pipeline import metrics

# anymail's normalized event types -> the record's status. deferred, autoresponded, (un)subscribed and unknown say
# nothing about delivery and change nothing; opened and clicked only stamp opened_at.
STATUSES = {
    "queued": "sent",
    "sent": "sent",
    "delivered": "delivered",
    "bounced": "bounced",
    "complained": "complained",
    "rejected": "failed",
    "failed": "failed",
}
ENGAGEMENT = ("opened", "clicked")


def on_tracking(sender, event, esp_name, **kwargs):
    """Receiver of anymail.signals.tracking: update the record of the event's message."""
    opened = event.event_type in ENGAGEMENT
    status = STATUSES.get(event.event_type)
    esp = esp_of_view(sender) or "unknown"
    if status is None and not opened:
        metrics.count(metrics.tracking_field(esp, "ignored"))
        return None
    metadata = event.metadata if isinstance(event.metadata, dict) else {}
    result = apply(
        StatusEvent(
            status=status,
            message_id=_text(event.message_id),
            notification_id=_text(metadata.get("sluice_id")),
            channel=_text(metadata.get("sluice_channel")),
            recipient=_text(event.recipient),
            detail=_text(event.description or event.mta_response),
            at=event.timestamp,
            opened=opened,
            # An ESP speaks only for what was sent through it: never for another ESP's sends, nor an SMS provider's.
            senders=frozenset(used_esps().get(esp, ())),
        ),
        reported_by=esp,
    )
    metrics.count(metrics.tracking_field(esp, result))
    return result


def _text(value):
    return value[:300] if isinstance(value, str) else ""
