"""Sluice's HTTP endpoints, to include under a prefix of the host's choosing:

path("api/", include("notifications.urls"))   # POST /api/notifications/
"""

from django.urls import path

from .ingest.views import ingest

app_name = "sluice"

urlpatterns = [
    path("notifications/", ingest, name="ingest"),
]
