"""Admin: the activity log, for support. A user's timeline in words (newest first, filtered by kind, channel and
outcome), a page per notification id with every step across channels, and ActivityInline, the newest steps on a
host's own User admin page; all need sluice_notifications.view_activity.
"""

from django.contrib import admin
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied, ValidationError
from django.forms.models import BaseInlineFormSet
from django.http import Http404
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html
from django.utils.translation import gettext_lazy as _

from . import queries
from .models import ActivityEntry
from .words import OUTCOME_NAMES, Words

PERMISSION = "sluice_notifications.view_activity"
#: The most entries the timeline page shows.
TIMELINE_ROWS = 200
#: The entries a user's own admin page shows (ActivityInline), newest first.
INLINE_ROWS = 20


def user_of(user_id):
    """The user whose pk is ``user_id`` (text from a URL), or Http404."""
    user_model = get_user_model()
    try:
        pk = user_model._meta.pk.to_python(user_id)
        return user_model._default_manager.get(pk=pk)
    except (ValidationError, user_model.DoesNotExist):
        raise Http404("no such user") from None


@admin.register(ActivityEntry)
class ActivityEntryAdmin(admin.ModelAdmin):
    """Read-only: entries are written by admission, the workers and the drain."""

    list_display = ("at", "user", "kind", "entity_id", "outcome", "reason", "channel", "steps", "timeline")
    list_filter = ("outcome", "kind", "channel", "klass")
    search_fields = ("=notification_id", "user__username", "user__email", "entity_id")
    list_select_related = ("user",)
    date_hierarchy = "at"
    show_full_result_count = False

    def has_view_permission(self, request, obj=None):
        return request.user.has_perm(PERMISSION)

    def has_module_permission(self, request):
        return request.user.has_perm(PERMISSION)

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    @admin.display(description=_("every step"))
    def steps(self, obj):
        url = reverse(f"{self.admin_site.name}:sluice_notifications_activity_notification", args=[obj.notification_id])
        return format_html('<a href="{}">{}</a>', url, obj.notification_id[:12])

    @admin.display(description=_("user's timeline"))
    def timeline(self, obj):
        url = reverse(f"{self.admin_site.name}:sluice_notifications_activity_user", args=[obj.user_id])
        return format_html('<a href="{}">{}</a>', url, _("timeline"))

    def get_urls(self):
        own = [
            path(
                "user/<str:user_id>/",
                self.admin_site.admin_view(self.user_view),
                name="sluice_notifications_activity_user",
            ),
            path(
                "notification/<str:notification_id>/",
                self.admin_site.admin_view(self.notification_view),
                name="sluice_notifications_activity_notification",
            ),
        ]
        return own + super().get_urls()

    def _context(self, request, title, **extra):
        return {**self.admin_site.each_context(request), "opts": self.model._meta, "title": title, **extra}

    def _rows(self, entries, words_of):
        return [(entry, words_of(entry).say(entry)) for entry in entries]

    def user_view(self, request, user_id):
        """A user's timeline, newest first, in words; ?kind=, ?channel=, ?outcome= narrow it."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        user = user_of(user_id)
        chosen = {name: request.GET.get(name, "") for name in ("kind", "channel", "outcome")}
        entries = queries.timeline(user.pk, **chosen, limit=TIMELINE_ROWS)
        words = Words(user)
        every = ActivityEntry.objects.filter(user=user).order_by()
        choices = {
            "kind": sorted(set(every.values_list("kind", flat=True).distinct()) - {""}),
            "channel": sorted(set(every.values_list("channel", flat=True).distinct()) - {""}),
            "outcome": [(name, label) for name, label in OUTCOME_NAMES.items()],
        }
        context = self._context(
            request,
            _("Notifications of %(user)s") % {"user": words.name},
            rows=self._rows(entries, lambda _entry: words),
            chosen=chosen,
            choices=choices,
            shown=len(entries),
            most=TIMELINE_ROWS,
            site=self.admin_site.name,
        )
        return TemplateResponse(request, "admin/sluice/activity_user.html", context)

    def notification_view(self, request, notification_id):
        """Every step of one notification id across its channels, with times; a digest's lists the events it
        carried, a folded event's the digest that carried it."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        own, carried, carriers = queries.steps(notification_id)
        if not own:
            raise Http404("no steps recorded for this notification")
        cache = {}

        def words_of(entry):
            if entry.user_id not in cache:
                cache[entry.user_id] = Words(entry.user)
            return cache[entry.user_id]

        context = self._context(
            request,
            _("Notification %(id)s") % {"id": notification_id},
            rows=self._rows(own, words_of),
            carried=self._rows(carried, words_of),
            carriers=carriers,
            user=own[0].user,
            site=self.admin_site.name,
        )
        return TemplateResponse(request, "admin/sluice/activity_notification.html", context)


class _NewestSteps(BaseInlineFormSet):
    """The user's newest INLINE_ROWS entries, each with its words: an inline's queryset cannot be sliced (the formset
    narrows it to the user afterwards), so the formset reads them itself, in one query."""

    def get_queryset(self):
        if not hasattr(self, "_newest"):
            user = self.instance
            entries = queries.timeline(user.pk, limit=INLINE_ROWS) if user.pk is not None else []
            words = Words(user)
            for entry in entries:
                entry.said = words.say(entry)
            self._newest = entries
        return self._newest


class ActivityInline(admin.TabularInline):
    """The newest steps of a user's notifications, in words, on the host's own User admin page (add it to its
    ``inlines``, as PreferenceInline; Sluice never replaces a host's User admin), with a link to each notification's
    steps and, below, to the user's whole timeline. Read-only; shown only to staff with view_activity."""

    model = ActivityEntry
    formset = _NewestSteps
    template = "admin/sluice/activity_inline.html"
    fields = readonly_fields = ("at", "what_happened", "channel", "steps")
    extra = 0
    max_num = 0
    can_delete = False
    verbose_name = _("recent notification step")
    verbose_name_plural = _("recent notifications (the newest steps)")

    def has_view_permission(self, request, obj=None):
        return request.user.has_perm(PERMISSION)

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    @admin.display(description=_("what happened"))
    def what_happened(self, obj):
        return getattr(obj, "said", "")

    @admin.display(description=_("every step"))
    def steps(self, obj):
        url = reverse(f"{self.admin_site.name}:sluice_notifications_activity_notification", args=[obj.notification_id])
        return format_html('<a href="{}">{}</a>', url, obj.notification_id[:12])
