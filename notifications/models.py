"""Sluice's models, where Django looks for an app's models: each wing keeps its own, gathered here."""

from notifications.activity.models import ActivityEntry
from notifications.delivery.models import DeadLetter, Delivery, DeliveryStatus, Provider, Suppression
from notifications.inbox.models import InboxItem
from notifications.ingest.models import IngestToken
from notifications.preferences.models import NotificationSettings, Preference
from notifications.scheduling.models import ScheduledSend
from notifications.topics.models import Subscription, TopicFanout

__all__ = [
    "ActivityEntry",
    "DeadLetter",
    "Delivery",
    "DeliveryStatus",
    "InboxItem",
    "IngestToken",
    "NotificationSettings",
    "Preference",
    "Provider",
    "ScheduledSend",
    "Subscription",
    "Suppression",
    "TopicFanout",
]
