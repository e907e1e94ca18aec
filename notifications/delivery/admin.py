"""Admin: delivery status records (searchable by user, kind, status and provider) and the suppressed addresses."""

from django.contrib import admin, messages
from django.utils.translation import gettext_lazy as _

from notifications.delivery.models import Delivery, Suppression


@admin.register(Delivery)
class DeliveryAdmin(admin.ModelAdmin):
    """Read-only: the records are written by the workers and the providers' webhooks, and pruned by beat."""

    list_display = ("sent_at", "notification_id", "user", "kind", "channel", "provider", "status", "updated_at")
    list_filter = ("status", "channel", "provider", "kind")
    search_fields = ("notification_id", "provider_message_id", "user__username", "user__email", "=recipient")
    date_hierarchy = "sent_at"
    list_select_related = ("user",)
    # A changelist must not count a table of millions of rows on every page view.
    show_full_result_count = False

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(Suppression)
class SuppressionAdmin(admin.ModelAdmin):
    """View the suppressed addresses and lift a suppression (the delete permission): the channel sends again."""

    list_display = ("address", "reason", "provider", "created_at", "notification_id", "detail")
    list_filter = ("reason", "provider")
    search_fields = ("address",)
    actions = ("lift",)

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def get_actions(self, request):
        found = super().get_actions(request)
        found.pop("delete_selected", None)  # "lift" says what deleting a suppression does
        return found

    @admin.action(description=_("Lift selected suppressions"), permissions=["delete"])
    def lift(self, request, queryset):
        lifted, _by_model = queryset.delete()
        self.message_user(
            request, _("%d suppressions lifted: those addresses get email again.") % lifted, messages.SUCCESS
        )
