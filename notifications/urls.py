"""Sluice's HTTP endpoints, to include under a prefix of the host's choosing, for example
``path("api/", include("notifications.urls"))``: POST /api/notifications/ (ingest, a service's bearer token),
GET and PUT /api/preferences/ (the signed-in user's own preferences), /api/inbox/ (their inbox), the pages for
people (their preference page and inbox page, and the one-click unsubscribe link /api/u/<token>/), and the
providers' webhooks."""

from django.urls import include, path

from notifications.activity.views import activity_view
from notifications.delivery.callbacks import provider_status
from notifications.delivery.esp_webhooks import esp_tracking
from notifications.inbox.page import inbox_page
from notifications.preferences.page import preferences_page
from notifications.preferences.unsubscribe import unsubscribe
from notifications.preferences.views import preferences_view

from .ingest.cancel import cancel
from .ingest.views import ingest

app_name = "sluice"

urlpatterns = [
    path("notifications/", ingest, name="ingest"),
    # A service's scheduled sends of one kind and entity, cancelled (notifications.ingest.cancel).
    path("notifications/cancel/", cancel, name="ingest_cancel"),
    path("preferences/", preferences_view, name="preferences"),
    # The activity log for the host's support tools: staff with sluice_notifications.view_activity (docs/activity.md).
    path("activity/", activity_view, name="activity"),
    # The signed-in user's inbox: list, unread count, mark read, archive (notifications.inbox.views).
    path("inbox/", include("notifications.inbox.urls")),
    # Pages for people, plain forms that work without a script (templates under sluice/pages/, overridable).
    path("pages/preferences/", preferences_page, name="preferences_page"),
    path("pages/inbox/", inbox_page, name="inbox_page"),
    # The one-click unsubscribe link of an email (RFC 8058): its signed token authenticates, no session needed.
    path("u/<str:token>/", unsubscribe, name="unsubscribe"),
    # The generic HTTP providers' delivery status callbacks (notifications.delivery.callbacks).
    path("providers/<str:channel>/<str:provider>/status/", provider_status, name="provider_status"),
    # anymail's tracking webhooks (e.g. anymail/postmark/tracking/), only those of the ESPs SLUICE_CHANNELS'
    # providers send through, and never its inbound ones: they authenticate the ESP and send anymail's tracking
    # signal, which notifications.delivery.tracking turns into delivery status records.
    path("anymail/<str:esp>/tracking/", esp_tracking, name="esp_tracking"),
]
