"""Admin: inbox items by user, kind and read state, and a page showing staff what one user's inbox shows."""

from django.contrib import admin, messages
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.http import Http404
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
    """Read-only: items are written by the inbox channel and changed by their user (the API, the bell). Staff with
    the delete permission may delete items; their users' unread counts are counted again once it commits."""

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

    def delete_model(self, request, obj):
        super().delete_model(request, obj)
        self._recount_on_commit(request, {obj.user_id})

    def delete_queryset(self, request, queryset):
        """The bulk "delete selected" action: the users of the deleted items are counted again."""
        users = set(queryset.values_list("user_id", flat=True).distinct())
        super().delete_queryset(request, queryset)
        self._recount_on_commit(request, users)

    def _recount_on_commit(self, request, users):
        def recount():
            try:
                for user_id in users:
                    unread.refresh(user_id)
            except RedisError as exc:
                # The items are gone; a count left too high is counted again at the user's next change.
                self.message_user(
                    request,
                    _("The unread counts could not be brought in step: Redis is unavailable (%(error)s).")
                    % {"error": type(exc).__name__},
                    messages.WARNING,
                )

        transaction.on_commit(recount)

    def user_view(self, request, user_id):
        """What the user's bell shows: their unread count and latest items, newest first; 404 for an id that is no
        user's (never a count made in Redis for it)."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        user_model = get_user_model()
        try:
            user_id = user_model._meta.pk.to_python(user_id)
        except ValidationError:
            raise Http404("no such user") from None
        if not user_model._default_manager.filter(pk=user_id).exists():
            raise Http404("no such user")
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
