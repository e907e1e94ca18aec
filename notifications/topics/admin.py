"""Admin: a topic's subscriptions (staff add and remove them as subscribe() and unsubscribe() do), and the fan-out jobs
of notify_topic() with their progress and state (read-only: their steps move them)."""

from django.contrib import admin
from django.utils.translation import gettext_lazy as _

from .models import Subscription, TopicFanout


@admin.register(Subscription)
class SubscriptionAdmin(admin.ModelAdmin):
    list_display = ("topic", "user", "created_at")
    search_fields = ("topic",)
    list_select_related = ("user",)
    # A user picked by id: a topic may have 100,000 subscribers, and a host as many users.
    raw_id_fields = ("user",)
    readonly_fields = ("created_at",)
    ordering = ("topic", "id")
    # No count(*) of a 100,000-row topic on every page.
    show_full_result_count = False

    def has_change_permission(self, request, obj=None):
        return False  # a subscription is added or removed, never moved to another topic or user


@admin.register(TopicFanout)
class TopicFanoutAdmin(admin.ModelAdmin):
    """Read-only: a job is made by notify_topic() (or ingest) and moved by its class's steps."""

    list_display = ("id", "topic", "kind", "entity_id", "state", "progress", "rejected", "created_at", "finished_at")
    list_filter = ("state", "klass", "kind")
    search_fields = ("topic", "entity_id", "kind")
    date_hierarchy = "created_at"
    readonly_fields = [field.name for field in TopicFanout._meta.fields] + ["progress"]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    @admin.display(description=_("progress"))
    def progress(self, job):
        if not job.subscribers:
            return f"{job.done}"
        return f"{job.done} of {job.subscribers} ({min(100, 100 * job.done // job.subscribers)} %)"
