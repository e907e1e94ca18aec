"""Admin: inbox items by user, kind and read state, and a page showing staff what one user's inbox shows."""

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html
from django.utils.translation import gettext_lazy as _
from redis.exceptions import RedisError

from notifications.inbox.models import InboxItem

from . import unread


class ReadState(admin.SimpleListFilter):
    title = _("state")
    parameter_name = "state"

    def lookups(self, request, model_admin):
        return [("unread", _("unread")), ("read", _("read")), ("archived", _("archived"))]

    def queryset(self, request, queryset):
        if self.value() == "unread":
            return queryset.filter(read_at__isnull=True, archived_at__isnull=True)
        if self.value() == "read":
            return queryset.filter(read_at__isnull=False, archived_at__isnull=True)
        if self.value() == "archived":
            return queryset.filter(archived_at__isnull=False)
        return queryset


@admin.register(InboxItem)
class InboxItemAdmin(admin.ModelAdmin):
    """Read-only: items are written by the inbox channel and changed by their user (the API, the bell)."""

    list_display = ("title", "user", "kind", "entity_id", "count", "updated_at", "read_at", "escalated_at", "as_user")
    list_filter = (ReadState, "kind")
    search_fields = ("user__username", "user__email", "entity_id")
    list_select_related = ("user",)
    date_hierarchy = "updated_at"

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    @admin.display(description=_("inbox as the user sees it"))
    def as_user(self, obj):
        url = reverse(f"{self.admin_site.name}:sluice_notifications_inboxitem_user", args=[obj.user_id])
        return format_html('<a href="{}">{}</a>', url, _("view"))

    def get_urls(self):
        own = [
            path(
                "user/<str:user_id>/",
                self.admin_site.admin_view(self.user_view),
                name="sluice_notifications_inboxitem_user",
            )
        ]
        return own + super().get_urls()

    def user_view(self, request, user_id):
        """What the user's bell shows: their unread count and latest items, newest first."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        items = InboxItem.objects.filter(user_id=user_id, archived_at__isnull=True).order_by("-pk")[:50]
        try:
            count = unread.read(user_id)[0]
        except RedisError:
            count = None
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": _("Inbox of user %(user)s") % {"user": user_id},
            "items": items,
            "unread": count,
        }
        return TemplateResponse(request, "admin/sluice/inbox_user.html", context)
