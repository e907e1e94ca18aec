"""Admin: digest preferences (search, filters, bulk actions; an inline the host adds to its User admin) and
the digest's state."""

from datetime import UTC, datetime

from django import forms
from django.contrib import admin, messages
from django.utils.translation import gettext_lazy as _

from .kinds import all_kinds
from .models import DigestPreference
from .preferences import mirror


class DigestPreferenceForm(forms.ModelForm):
    """The kind is a choice among the registered kinds (or every kind), and a new row saves as it stands."""

    class Meta:
        model = DigestPreference
        fields = ("user", "kind", "deliver_separately")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # A kind since removed from SLUICE_KINDS stays listed on its own row, so saving never changes it.
        names = set(all_kinds()) | ({self.instance.kind} if self.instance.kind else set())
        self.fields["kind"] = forms.ChoiceField(
            label=_("kind"),
            choices=[("", _("all kinds")), *((name, name) for name in sorted(names))],
            required=False,
            help_text=DigestPreference._meta.get_field("kind").help_text,
        )

    def has_changed(self):
        # Django skips an added inline row left at its defaults ("all kinds", "deliver separately") as
        # unchanged, and says the page saved: the user's events kept folding. A new row is a change.
        return self.instance.pk is None or super().has_changed()


@admin.register(DigestPreference)
class DigestPreferenceAdmin(admin.ModelAdmin):
    form = DigestPreferenceForm
    list_display = ("user", "kind_or_all", "deliver_separately", "updated_at")
    list_filter = ("deliver_separately", "kind")
    search_fields = ("user__username", "user__email", "user__first_name", "user__last_name")
    autocomplete_fields = ("user",)
    actions = ("deliver_separately", "allow_digests")
    change_list_template = "admin/sluice/preferences_change_list.html"

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

    from digest.store import state
    from pipeline.depth import snapshot

    try:
        raw = state()
        queues = snapshot()
    except RedisError:
        return None
    when = {k: datetime.fromtimestamp(raw[k], UTC) if raw[k] else None for k in ("oldest_pending_at", "last_flush_at")}
    return {**raw, **when, "queues": queues}


class DigestPreferenceInline(admin.TabularInline):
    """A user's digest preferences on their page. Sluice never touches your User admin: add this inline to it,
    e.g. ``inlines = [*UserAdmin.inlines, DigestPreferenceInline]`` (docs/integrate.md)."""

    model = DigestPreference
    form = DigestPreferenceForm
    extra = 0
    fields = ("kind", "deliver_separately", "updated_at")
    readonly_fields = ("updated_at",)
