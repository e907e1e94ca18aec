"""URL configuration of Sluice's own project (the demo): the admin, Sluice's API, and a health check."""

from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin
from django.http import JsonResponse
from django.urls import include, path
from django_celery_beat.models import PeriodicTask

from notifications.admin import ActivityInline, GuardedPeriodicTaskAdmin, NotificationSettingsInline, PreferenceInline


def healthz(request):
    """Liveness: the process serves requests. It checks no dependency, so an outage never restarts pods."""
    return JsonResponse({"status": "ok"})


class DemoUserAdmin(UserAdmin):
    """What a host project does in its own admin.py: Sluice never replaces a User admin, it offers the inline."""

    inlines = [*UserAdmin.inlines, PreferenceInline, NotificationSettingsInline, ActivityInline]


User = get_user_model()
if admin.site.is_registered(User):
    admin.site.unregister(User)
admin.site.register(User, DemoUserAdmin)
# What a host project does too: django-celery-beat's admin, with its actions on Sluice's tasks behind the change
# permission (sluice.W002 otherwise).
if admin.site.is_registered(PeriodicTask):
    admin.site.unregister(PeriodicTask)
admin.site.register(PeriodicTask, GuardedPeriodicTaskAdmin)

urlpatterns = [
    path("admin/", admin.site.urls),
    path("healthz", healthz),
    path("api/", include("notifications.urls")),
]
