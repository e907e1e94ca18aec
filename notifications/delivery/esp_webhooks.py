"""The ESPs' tracking webhooks Sluice mounts: only those of the ESPs its providers send through, never inbound ones.

``anymail/<esp>/tracking/`` answers 404 for an ESP no provider in SLUICE_CHANNELS uses (anymail's email backend
``anymail.backends.<esp>.EmailBackend`` in its options), and 503 while the ESP's webhook would accept anyone
(anymail only warns when ANYMAIL["WEBHOOK_SECRET"] is unset; an ESP that signs its webhooks needs its signing key).
Otherwise anymail's own tracking view authenticates the request and parses it, at most
SLUICE_TRACKING_MAX_EVENTS events of it are applied, and the rest are counted as dropped.
"""

import logging
import warnings
from functools import cache

from django.contrib.auth.decorators import login_not_required
from django.core.exceptions import ImproperlyConfigured
from django.http import Http404, JsonResponse
from django.views.decorators.csrf import csrf_exempt

from pipeline import metrics
from pipeline.conf import sluice_settings

logger = logging.getLogger("sluice.tracking")

BACKEND_PREFIX = "anymail.backends."
WEBHOOK_PREFIX = "anymail.webhooks."


def esp_of_backend(backend):
    """The ESP of an anymail email backend's dotted path ("anymail.backends.postmark.EmailBackend" -> "postmark"),
    or None for any other backend."""
    if not isinstance(backend, str) or not backend.startswith(BACKEND_PREFIX):
        return None
    return backend[len(BACKEND_PREFIX) :].split(".")[0] or None


def esp_of_view(view_class):
    """The ESP of one of anymail's webhook view classes, or of a subclass of one (by the module that defines it)."""
    for klass in view_class.__mro__:
        if klass.__module__.startswith(WEBHOOK_PREFIX):
            return klass.__module__[len(WEBHOOK_PREFIX) :]
    return None


def used_esps():
    """{esp: {(channel, provider), ...}}: the ESPs SLUICE_CHANNELS providers send through, and who sends."""
    found = {}
    for channel in sluice_settings().channels.values():
        for provider in channel.providers:
            esp = esp_of_backend(provider.options.get("email_backend"))
            if esp is not None and tracking_view(esp) is not None:
                found.setdefault(esp, set()).add((channel.name, provider.name))
    return found


@cache
def tracking_view(esp):
    """anymail's tracking view class of ``esp`` (its URL named "<esp>_tracking_webhook"), or None."""
    from anymail.urls import urlpatterns

    for pattern in urlpatterns:
        if pattern.name == f"{esp}_tracking_webhook":
            return pattern.callback.view_class, dict(pattern.callback.view_initkwargs)
    return None


def refusal(esp):
    """Why ``esp``'s tracking webhook would accept forged requests as it is configured now, or None when it is safe:
    no ANYMAIL["WEBHOOK_SECRET"] for an ESP anymail authenticates by basic auth only, or no signing key for one
    that signs its webhooks."""
    from anymail.exceptions import AnymailInsecureWebhookWarning

    view_class, initkwargs = tracking_view(esp)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # anymail's other warnings (an ESP it no longer supports) are the view's
        warnings.simplefilter("error", AnymailInsecureWebhookWarning)
        try:
            view_class(**initkwargs)
        except AnymailInsecureWebhookWarning:
            return f"ANYMAIL['WEBHOOK_SECRET'] is not set, and anymail's {esp} webhook has no other authentication"
        except ImproperlyConfigured as exc:  # anymail's own error names the missing signing key
            return str(exc).splitlines()[0]
    return None


@cache
def _capped(view_class):
    class Capped(view_class):
        def parse_events(self, request):
            events = super().parse_events(request)
            cap = sluice_settings().tracking_max_events
            if len(events) > cap:
                # Past the cap the request costs nothing more; the ESP gets its 200 and the drop is counted.
                esp, dropped = esp_of_view(view_class), len(events) - cap
                metrics.count(metrics.tracking_field(esp, "over_cap"), dropped)
                logger.warning("%s webhook: %d events in one request, %d dropped", esp, len(events), dropped)
                events = events[:cap]
            return events

    Capped.__name__ = Capped.__qualname__ = f"Capped{view_class.__name__}"
    return Capped


@csrf_exempt
@login_not_required
def esp_tracking(request, esp):
    """anymail's tracking webhook of ``esp``, when a provider uses that ESP and its webhook is authenticated."""
    if esp not in used_esps():
        raise Http404("no provider in SLUICE_CHANNELS sends through this ESP")
    reason = refusal(esp)
    if reason is not None:
        metrics.count(metrics.tracking_field(esp, "refused"))
        logger.error("%s tracking webhook refused: it is not authenticated: %s", esp, reason)
        detail = "this ESP's webhook has no secret or signing key configured"
        return JsonResponse({"error": "webhook_not_configured", "detail": detail}, status=503)
    view_class, initkwargs = tracking_view(esp)
    return _capped(view_class).as_view(**initkwargs)(request)
