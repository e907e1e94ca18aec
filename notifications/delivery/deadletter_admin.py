"""The dead letters' admin page: list them with filters, replay (change permission) or discard (delete)."""

from datetime import UTC, datetime

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpResponseRedirect
from django.utils.translation import gettext_lazy as _
from redis.exceptions import RedisError

from notifications.delivery.models import DeadLetter
from notifications.delivery.page_admin import RedisPageAdmin
from notifications.kinds import all_kinds
from pipeline.broker import deadletters

AGES = (("3600", _("1 hour")), ("86400", _("1 day")), ("604800", _("1 week")))
SHOWN = 500


@admin.register(DeadLetter)
class DeadLetterAdmin(RedisPageAdmin):
    template = "admin/sluice/deadletters.html"

    def page(self, request):
        filters = {key: request.GET.get(key, "") for key in ("reason", "kind", "older_than")}
        letters, kept, redis_down = [], 0, False
        try:
            letters = deadletters.entries(
                reason=filters["reason"] or None,
                kind=filters["kind"] or None,
                older_than_s=float(filters["older_than"]) if filters["older_than"].isdigit() else None,
                limit=SHOWN,
            )
            kept = deadletters.size()
        except RedisError:
            redis_down = True
        return {
            "title": _("Dead letters"),
            "letters": [{**vars(letter), "when": datetime.fromtimestamp(letter.at, UTC)} for letter in letters],
            "kept": kept,
            "redis_down": redis_down,
            "filters": filters,
            "reasons": deadletters.REASONS,
            "kinds": sorted({*all_kinds(), *(letter.kind for letter in letters)}),
            "ages": AGES,
            "can_delete": self.has_delete_permission(request),
        }

    def act(self, request):
        action, ids = request.POST.get("action"), set(request.POST.getlist("ids"))
        allowed = {"replay": self.has_change_permission, "discard": self.has_delete_permission}
        if action not in allowed or not allowed[action](request):
            raise PermissionDenied
        letters = deadletters.entries(ids=ids) if ids else []
        if action == "discard":
            self.message_user(request, _("%d dead letters discarded.") % deadletters.discard(letters), messages.SUCCESS)
        else:
            results = [deadletters.replay(letter) for letter in letters]
            replayed, full = results.count(deadletters.REPLAYED), results.count(deadletters.FULL)
            self.message_user(request, _("%d dead letters replayed.") % replayed, messages.SUCCESS)
            if full:
                self.message_user(request, _("%d left for later: their queue is full.") % full, messages.WARNING)
        return HttpResponseRedirect(request.get_full_path())
