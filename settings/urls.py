"""URL configuration: the admin and a health check for probes."""

from django.contrib import admin
from django.http import JsonResponse
from django.urls import path

from notifications.ingest.views import ingest


def healthz(request):
    """Liveness: the process serves requests. It checks no dependency, so an outage never restarts pods."""
    return JsonResponse({"status": "ok"})


urlpatterns = [
    path("admin/", admin.site.urls),
    path("healthz", healthz),
    path("api/notifications/", ingest, name="notifications-ingest"),
]
