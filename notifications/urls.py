"""Sluice's HTTP endpoints, to include under a prefix of the host's choosing, for example
``path("api/", include("notifications.urls"))``: POST /api/notifications/ (ingest, a service's bearer token),
GET and PUT /api/preferences/ (the signed-in user's own preferences)."""

from django.urls import path

from .ingest.views import ingest
from .preferences_api import preferences_view

app_name = "sluice"

urlpatterns = [
    path("notifications/", ingest, name="ingest"),
    path("preferences/", preferences_view, name="preferences"),
]
