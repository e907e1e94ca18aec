"""Admin: ingest tokens. The raw token is shown once, on creation; only its digest and prefix are stored."""

from django import forms
from django.contrib import admin, messages
from django.template.response import TemplateResponse
from django.utils.translation import gettext_lazy as _

from notifications.ingest.models import IngestToken
from notifications.kinds import all_kinds

MAX_FIELD_NAME = 100


class IngestTokenForm(forms.ModelForm):
    kinds = forms.MultipleChoiceField(
        label=_("kinds"),
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text=IngestToken._meta.get_field("kinds").help_text,
    )
    payload_fields = forms.CharField(
        label=_("payload fields"),
        required=False,
        help_text=_("Comma-separated top-level payload fields this token may send, e.g. title, url. Empty: any field."),
    )

    class Meta:
        model = IngestToken
        fields = (
            "name",
            "service",
            "kinds",
            "payload_fields",
            "reveal_details",
            "rate_per_second",
            "burst",
            "is_active",
        )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # A kind since removed from SLUICE_KINDS stays listed, so saving the form never drops it silently.
        names = set(all_kinds()) | set(self.instance.kinds or ())
        self.fields["kinds"].choices = [(name, name) for name in sorted(names)]
        if self.instance.payload_fields is not None:
            self.initial["payload_fields"] = ", ".join(self.instance.payload_fields)

    def clean_payload_fields(self):
        text = self.cleaned_data["payload_fields"].strip()
        if not text:
            return None
        names = [name.strip() for name in text.split(",")]
        bad = [name for name in names if not name or len(name) > MAX_FIELD_NAME or not name.isprintable()]
        if bad:
            raise forms.ValidationError(_("Field names are printable, 1 to 100 characters, separated by commas."))
        return sorted(set(names))


@admin.register(IngestToken)
class IngestTokenAdmin(admin.ModelAdmin):
    form = IngestTokenForm
    list_display = (
        "name",
        "service",
        "prefix",
        "kinds_or_none",
        "rate_per_second",
        "burst",
        "is_active",
        "last_used_at",
    )
    list_filter = ("is_active",)
    search_fields = ("name", "service", "prefix")
    readonly_fields = ("prefix", "created_at", "last_used_at")
    actions = ("revoke",)

    @admin.display(description=_("kinds"))
    def kinds_or_none(self, obj):
        return ", ".join(obj.kinds) if obj.kinds else _("none")

    @admin.action(description=_("Revoke selected tokens"), permissions=["change"])
    def revoke(self, request, queryset):
        revoked = queryset.update(is_active=False)
        self.message_user(request, _("%d tokens revoked.") % revoked, messages.SUCCESS)

    def save_model(self, request, obj, form, change):
        raw = None if change else obj.set_new_token()
        super().save_model(request, obj, form, change)
        # Kept on the instance for response_add only: never in a message, which Django keeps in a cookie.
        obj._raw_token = raw

    def response_add(self, request, obj, post_url_continue=None):
        raw = getattr(obj, "_raw_token", None)
        if not raw:
            return super().response_add(request, obj, post_url_continue)
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": _("Copy the new token"),
            "token": obj,
            "raw_token": raw,
        }
        # The one page that shows the raw token; the admin's views already forbid caching it (no-store).
        return TemplateResponse(request, "admin/sluice/token_created.html", context)
