"""Admin: digest preferences (search, filters, bulk actions, an inline on User) and the digest's state."""

from datetime import UTC, datetime

from django.contrib import admin, messages
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin
from django.utils.translation import gettext_lazy as _

from .models import DigestPreference
from .preferences import mirror


@admin.register(DigestPreference)
class DigestPreferenceAdmin(admin.ModelAdmin):
    list_display = ("user", "kind_or_all", "deliver_separately", "updated_at")
    list_filter = ("deliver_separately", "kind")
    search_fields = ("user__username", "user__email", "user__first_name", "user__last_name")
    autocomplete_fields = ("user",)
    actions = ("deliver_separately", "allow_digests")
    change_list_template = "admin/digest/digestpreference/change_list.html"

    @admin.display(description=_("kind"), ordering="kind")
    def kind_or_all(self, obj):
        return obj.kind or _("all kinds")

    @admin.action(description=_("Deliver every event separately"), permissions=["change"])
    def deliver_separately(self, request, queryset):
        self._set(request, queryset, True)

    @admin.action(description=_("Allow digests"), permissions=["change"])
    def allow_digests(self, request, queryset):
        self._set(request, queryset, False)

    def _set(self, request, queryset, separately):
        # update() sends no post_save, so the Redis mirror is written here.
        changed = queryset.update(deliver_separately=separately)
        mirror(queryset)
        self.message_user(request, _("%d preferences updated.") % changed, messages.SUCCESS)

    def changelist_view(self, request, extra_context=None):
        return super().changelist_view(request, {**(extra_context or {}), "digest_state": digest_state()})


def digest_state():
    """The digest's state for the admin, with times as datetimes; None when Redis cannot be reached."""
    from redis.exceptions import RedisError

    from pipeline.depth import snapshot

    from .store import state

    try:
        raw = state()
        queues = snapshot()
    except RedisError:
        return None
    when = {k: datetime.fromtimestamp(raw[k], UTC) if raw[k] else None for k in ("oldest_pending_at", "last_flush_at")}
    return {**raw, **when, "queues": queues}


class DigestPreferenceInline(admin.TabularInline):
    model = DigestPreference
    extra = 0
    fields = ("kind", "deliver_separately", "updated_at")
    readonly_fields = ("updated_at",)


User = get_user_model()
if admin.site.is_registered(User):
    base = type(admin.site._registry[User])
    admin.site.unregister(User)
else:
    base = UserAdmin


@admin.register(User)
class SluiceUserAdmin(base):
    inlines = (*base.inlines, DigestPreferenceInline)
