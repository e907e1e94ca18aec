"""Admin: users' preferences and settings (filters, bulk actions; inlines the host adds to its User admin),
with the digest's state: what is due, what is held for later and why, the fold store's size, and on a user's
settings a preview of their pending digest."""

from datetime import UTC, datetime

from django import forms
from django.contrib import admin, messages
from django.template.loader import render_to_string
from django.utils.translation import gettext_lazy as _

from notifications.preferences import write_mirror
from notifications.preferences.models import NotificationSettings, Preference
from pipeline.conf import sluice_settings


def _choices(names, everything):
    return [("", everything), *((name, name) for name in sorted(names))]


class PreferenceForm(forms.ModelForm):
    """Kind, category and channel are choices among what is registered; a new row saves as it stands."""

    class Meta:
        model = Preference
        fields = ("user", "kind", "category", "channel", "mode")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        conf = sluice_settings()
        # A name since removed from the settings stays listed on its own row, so saving never changes it.
        kinds = {*conf.kinds, *filter(None, [self.instance.kind])}
        categories = {k.category for k in conf.kinds.values() if k.category} | set(
            filter(None, [self.instance.category])
        )
        channels = {*conf.channels, *filter(None, [self.instance.channel])}
        for name, names, everything in (
            ("kind", kinds, _("every kind (or the category)")),
            ("category", categories, _("no category")),
            ("channel", channels, _("every channel")),
        ):
            field = Preference._meta.get_field(name)
            self.fields[name] = forms.ChoiceField(
                label=field.verbose_name, choices=_choices(names, everything), required=False, help_text=field.help_text
            )

    def has_changed(self):
        # Django skips an added inline row left at its defaults as unchanged, and says the page saved: the
        # user's choice was lost. A new row is a change.
        return self.instance.pk is None or super().has_changed()


@admin.register(Preference)
class PreferenceAdmin(admin.ModelAdmin):
    form = PreferenceForm
    list_display = ("user", "kind", "category", "channel", "mode", "updated_at")
    list_filter = ("mode", "kind", "category", "channel")
    search_fields = ("user__username", "user__email", "user__first_name", "user__last_name")
    autocomplete_fields = ("user",)
    actions = ("make_instant", "make_digest", "make_off")
    change_list_template = "admin/sluice/preferences_change_list.html"

    @admin.action(description=_("Set the selected preferences to instant"), permissions=["change"])
    def make_instant(self, request, queryset):
        self._set(request, queryset, "instant")

    @admin.action(description=_("Set the selected preferences to digest"), permissions=["change"])
    def make_digest(self, request, queryset):
        self._set(request, queryset, "digest")

    @admin.action(description=_("Set the selected preferences to off"), permissions=["change"])
    def make_off(self, request, queryset):
        self._set(request, queryset, "off")

    def _set(self, request, queryset, mode):
        # Each row is validated (a mandatory kind cannot go off or digest); update() would skip that and the mirror.
        changed, refused = 0, []
        for row in queryset:
            row.mode = mode
            try:
                row.full_clean(validate_unique=False)
            except forms.ValidationError as exc:
                refused.append(f"{row}: {'; '.join(exc.messages)}")
                continue
            row.save(update_fields=["mode", "updated_at"])
            changed += 1
        self.message_user(request, _("%d preferences updated.") % changed, messages.SUCCESS)
        for reason in refused:
            self.message_user(request, reason, messages.ERROR)

    def changelist_view(self, request, extra_context=None):
        return super().changelist_view(request, {**(extra_context or {}), "digest_state": digest_state()})


@admin.register(NotificationSettings)
class NotificationSettingsAdmin(admin.ModelAdmin):
    list_display = ("user", "timezone", "quiet_start", "quiet_end", "cadence", "digest_at", "updated_at")
    list_filter = ("cadence", "timezone")
    search_fields = ("user__username", "user__email")
    autocomplete_fields = ("user",)
    readonly_fields = ("pending_digest",)

    def save_model(self, request, obj, form, change):
        super().save_model(request, obj, form, change)
        write_mirror([obj.user_id])

    @admin.display(description=_("Pending digest"))
    def pending_digest(self, obj):
        return pending_digest(obj.user_id if obj and obj.pk else None)


def pending_digest(user_id):
    """The user's pending digest as the next flush would send it (each message's channels, subject and body), and
    when it is due; for a settings page's read-only field."""
    from redis.exceptions import RedisError

    from notifications.digest_preview import preview

    if user_id is None:
        return "—"
    try:
        found = preview(user_id)
    except RedisError:
        return _("Redis cannot be reached: the pending digest is unknown.")
    if not found["messages"]:
        return _("Nothing pending.")
    return render_to_string("admin/sluice/pending_digest.html", found)


def digest_state():
    """The digest's state for the admin, with times as datetimes; None when Redis cannot be reached."""
    from redis.exceptions import RedisError

    from digest.fold_store import every_state
    from pipeline.broker.depth import snapshot

    try:
        raw = every_state()
        queues = snapshot()
    except RedisError:
        return None
    when = {k: datetime.fromtimestamp(raw[k], UTC) if raw[k] else None for k in ("next_due_at", "last_flush_at")}
    conf = sluice_settings().digest
    return {
        **raw,
        **when,
        "queues": queues,
        "max_fold_keys": conf.max_fold_keys,
        "max_fold_bytes": conf.max_fold_bytes,
    }


class PreferenceInline(admin.TabularInline):
    """A user's preferences on their page. Sluice never touches your User admin: add this inline (and
    NotificationSettingsInline) to it, e.g. ``inlines = [*UserAdmin.inlines, PreferenceInline]``."""

    model = Preference
    form = PreferenceForm
    extra = 0
    fields = ("kind", "category", "channel", "mode", "updated_at")
    readonly_fields = ("updated_at",)


class NotificationSettingsInline(admin.StackedInline):
    """A user's time zone, quiet hours and digest cadence on their page."""

    model = NotificationSettings
    extra = 0
    max_num = 1
    fields = ("timezone", "quiet_start", "quiet_end", "cadence", "digest_at", "pending_digest")
    readonly_fields = ("pending_digest",)

    @admin.display(description=_("Pending digest"))
    def pending_digest(self, obj):
        return pending_digest(obj.user_id if obj and obj.pk else None)
