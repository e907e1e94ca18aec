"""The providers' admin page: each channel's providers in order, their breakers' state, and forcing one open or
closed (a provider in maintenance) with the change permission."""

from datetime import UTC, datetime

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpResponseRedirect
from django.utils.translation import gettext_lazy as _
from redis.exceptions import RedisError

from notifications.delivery.models import Provider
from notifications.delivery.page_admin import RedisPageAdmin
from pipeline.conf import sluice_settings
from pipeline.gates import breaker

ACTIONS = {"force_open": "open", "force_closed": "closed", "release": None}


@admin.register(Provider)
class ProviderAdmin(RedisPageAdmin):
    template = "admin/sluice/providers.html"

    def page(self, request):
        rows, redis_down = [], False
        try:
            rows = [_row(state) for state in breaker.states()]
        except RedisError:
            redis_down = True
        return {"title": _("Providers"), "rows": rows, "redis_down": redis_down}

    def act(self, request):
        if not self.has_change_permission(request):
            raise PermissionDenied
        action = request.POST.get("action")
        if action not in ACTIONS:
            raise PermissionDenied
        known = {
            f"{channel.name}/{provider.name}": (channel.name, provider.name)
            for channel in sluice_settings().channels.values()
            for provider in channel.providers
        }
        chosen = [known[key] for key in request.POST.getlist("ids") if key in known]
        for channel, provider in chosen:
            breaker.force(channel, provider, ACTIONS[action])
        self.message_user(request, _("%d providers changed.") % len(chosen), messages.SUCCESS)
        return HttpResponseRedirect(request.get_full_path())


def _row(state):
    share = (lambda n: f"{100 * n / state.calls:.0f}%") if state.calls else (lambda n: "–")
    return {
        "id": f"{state.channel}/{state.provider}",
        "channel": state.channel,
        "provider": state.provider,
        "position": state.position + 1,
        "state": state.state.replace("_", "-"),
        "forced": state.forced,
        "has_breaker": state.has_breaker,
        "calls": state.calls,
        "failed": share(state.failed),
        "slow": share(state.slow),
        "open_until": datetime.fromtimestamp(state.open_until, UTC) if state.open_until else None,
    }
