"""Sluice's HTTP endpoints, to include under a prefix of the host's choosing:

path("api/", include("notifications.urls"))   # POST /api/notifications/ and the providers' webhooks
"""

from django.urls import include, path

from .callbacks import provider_status
from .ingest.views import ingest

app_name = "sluice"

urlpatterns = [
    path("notifications/", ingest, name="ingest"),
    # The generic HTTP providers' delivery status callbacks (notifications.callbacks).
    path("providers/<str:channel>/<str:provider>/status/", provider_status, name="provider_status"),
    # anymail's tracking webhooks (e.g. anymail/postmark/tracking/): they authenticate the ESP and send anymail's
    # tracking signal, which notifications.tracking turns into delivery status records.
    path("anymail/", include("anymail.urls")),
]
