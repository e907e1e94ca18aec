"""Sluice's admin, where Django looks for an app's admin: each wing registers its own pages, imported here.

PreferenceInline, NotificationSettingsInline, ActivityInline and GuardedPeriodicTaskAdmin are offered to the host, which
registers them on its own User and PeriodicTask admins (Sluice changes no registration it does not own)."""

from notifications.activity import admin as activity_admin
from notifications.activity.admin import ActivityInline
from notifications.delivery import admin as delivery_admin
from notifications.delivery import deadletter_admin, provider_admin
from notifications.inbox import admin as inbox_admin
from notifications.ingest import admin as ingest_admin
from notifications.preferences.admin import NotificationSettingsInline, PreferenceInline
from notifications.scheduling import admin as scheduling_admin
from notifications.topics import admin as topics_admin

from .beat_admin import GuardedPeriodicTaskAdmin

__all__ = [
    "ActivityInline",
    "GuardedPeriodicTaskAdmin",
    "NotificationSettingsInline",
    "PreferenceInline",
    "activity_admin",
    "deadletter_admin",
    "delivery_admin",
    "inbox_admin",
    "ingest_admin",
    "provider_admin",
    "scheduling_admin",
    "topics_admin",
]
