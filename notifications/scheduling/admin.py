"""Admin: the pending scheduled sends, by kind, entity, user and due time; staff with the delete permission cancel them
(their reserved seconds given back, as cancel_scheduled() does)."""

from django.contrib import admin, messages
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext
from redis.exceptions import RedisError

from .api import release_rows
from .models import PENDING, ScheduledSend


@admin.register(ScheduledSend)
class ScheduledSendAdmin(admin.ModelAdmin):
    """Read-only: a scheduled send is made and moved by notify() (or ingest) and published by the mover."""

    list_display = ("kind", "entity_id", "key", "user", "send_at", "due_at", "reserved", "state", "version")
    list_filter = ("state", "klass", "kind", "reserved")
    search_fields = ("entity_id", "kind", "key")
    date_hierarchy = "send_at"
    ordering = ("due_at", "id")
    list_select_related = ("user",)
    readonly_fields = [field.name for field in ScheduledSend._meta.fields]
    actions = ["cancel_selected"]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def get_actions(self, request):
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)  # cancel, below: it gives the reservations back too
        return actions

    @admin.action(description=_("Cancel the selected scheduled sends"), permissions=["delete"])
    def cancel_selected(self, request, queryset):
        rows = list(queryset.filter(state=PENDING).values_list("pk", "klass", "reserved", "due_at"))
        cancelled = ScheduledSend.objects.filter(pk__in=[row[0] for row in rows], state=PENDING).delete()[0]
        try:
            release_rows(rows)
        except RedisError as exc:
            self.message_user(request, _("Their Redis part waits for the stager: %s") % exc, messages.WARNING)
        skipped = queryset.count()
        self.message_user(request, ngettext("%d send cancelled.", "%d sends cancelled.", cancelled) % cancelled)
        if skipped:
            self.message_user(request, _("%d were being published, and go out.") % skipped, messages.WARNING)
