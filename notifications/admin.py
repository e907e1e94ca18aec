"""Admin: ingest tokens. The raw token is shown once, on creation; only its digest and prefix are stored."""

from django import forms
from django.contrib import admin, messages
from django.utils.translation import gettext_lazy as _

from .kinds import all_kinds
from .models import IngestToken


class IngestTokenForm(forms.ModelForm):
    kinds = forms.MultipleChoiceField(
        label=_("kinds"),
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text=IngestToken._meta.get_field("kinds").help_text,
    )

    class Meta:
        model = IngestToken
        fields = ("name", "kinds", "rate_per_second", "burst", "is_active")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # A kind since removed from SLUICE_KINDS stays listed, so saving the form never drops it silently.
        names = set(all_kinds()) | set(self.instance.kinds or ())
        self.fields["kinds"].choices = [(name, name) for name in sorted(names)]


@admin.register(IngestToken)
class IngestTokenAdmin(admin.ModelAdmin):
    form = IngestTokenForm
    list_display = ("name", "prefix", "kinds_or_all", "rate_per_second", "burst", "is_active", "last_used_at")
    list_filter = ("is_active",)
    search_fields = ("name", "prefix")
    readonly_fields = ("prefix", "created_at", "last_used_at")
    actions = ("revoke",)

    @admin.display(description=_("kinds"))
    def kinds_or_all(self, obj):
        return ", ".join(obj.kinds) if obj.kinds else _("all kinds")

    @admin.action(description=_("Revoke selected tokens"), permissions=["change"])
    def revoke(self, request, queryset):
        revoked = queryset.update(is_active=False)
        self.message_user(request, _("%d tokens revoked.") % revoked, messages.SUCCESS)

    def save_model(self, request, obj, form, change):
        raw = None if change else obj.set_new_token()
        super().save_model(request, obj, form, change)
        if raw:
            self.message_user(
                request,
                _("The token for %(name)s is %(token)s. Copy it now: it is stored hashed and will not be shown again.")
                % {"name": obj.name, "token": raw},
                messages.WARNING,
            )


from . import deadletter_admin, delivery_admin, provider_admin  # noqa: E402,F401 - registers their pages
from .preference_admin import NotificationSettingsInline, PreferenceInline  # noqa: E402 - for the host's User admin

__all__ = ["IngestTokenAdmin", "NotificationSettingsInline", "PreferenceInline"]
