"""Status callbacks of the generic HTTP providers: POST <prefix>providers/<channel>/<provider>/status/.

The provider authenticates with HTTP basic auth (its ``status_callback`` options); a request without the right
credentials changes nothing. The body is JSON or a form, at most MAX_BODY_BYTES, and names the provider's message id
and its status, which the options map onto sent, delivered or failed.
"""

import base64
import binascii
import json
from urllib.parse import parse_qsl

from django.contrib.auth.decorators import login_not_required
from django.http import JsonResponse
from django.utils.crypto import constant_time_compare
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from notifications.channels import get_provider
from notifications.delivery.records import StatusEvent, apply
from pipeline.conf import sluice_settings

MAX_BODY_BYTES = 16 * 1024
# Twilio's callbacks carry about twenty fields; a form with far more is not a status callback.
MAX_FIELDS = 100


@csrf_exempt
@login_not_required
@require_POST
def provider_status(request, channel, provider):
    """Apply one status callback; 200 also for a status that changes nothing, so the provider does not retry it."""
    conf = _callback_options(channel, provider)
    if conf is None:
        return _error(404, "unknown_provider", "no provider here takes status callbacks")
    if not _authorized(request.META.get("HTTP_AUTHORIZATION", ""), conf["basic_auth"]):
        response = _error(401, "unauthorized", "basic auth required")
        response["WWW-Authenticate"] = 'Basic realm="sluice"'
        return response
    try:
        length = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        length = MAX_BODY_BYTES + 1
    if length > MAX_BODY_BYTES:
        return _error(413, "body_too_large", f"at most {MAX_BODY_BYTES} bytes")
    data = _fields(request)
    if data is None:
        return _error(400, "invalid_body", "a JSON object or a form is expected")
    message_id, reported = data.get(conf["message_id_field"]), data.get(conf["status_field"])
    if not isinstance(message_id, str) or not isinstance(reported, str) or not message_id or len(message_id) > 255:
        return _error(400, "invalid_body", f"{conf['message_id_field']!r} and {conf['status_field']!r} are required")
    status = conf["statuses"].get(reported)
    if status is None:
        return JsonResponse({"result": "ignored"})
    detail = data.get("detail") or data.get("error_code") or data.get("ErrorCode") or ""
    event = StatusEvent(status=status, message_id=message_id, provider=provider, detail=str(detail)[:300])
    return JsonResponse({"result": apply(event, reported_by=provider)})


def _callback_options(channel, provider):
    conf = sluice_settings().channels.get(channel)
    if conf is None or provider not in {p.name for p in conf.providers}:
        return None
    return getattr(get_provider(channel, provider), "callback", None)


def _authorized(header, allowed):
    scheme, _, encoded = header.partition(" ")
    if scheme.lower() != "basic":
        return False
    try:
        given = base64.b64decode(encoded.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return False
    # Every allowed value is compared (no early exit on a match), in constant time each.
    return sum(constant_time_compare(given, value) for value in allowed) > 0


def _fields(request):
    content_type = request.content_type
    if content_type == "application/json":
        try:
            data = json.loads(request.body)
        except (ValueError, RecursionError):
            return None
        return data if isinstance(data, dict) else None
    if content_type == "application/x-www-form-urlencoded":
        try:
            pairs = parse_qsl(request.body.decode("ascii"), max_num_fields=MAX_FIELDS, errors="strict")
        except (ValueError, UnicodeDecodeError):
            return None
        return dict(pairs)
    return None


def _error(status, code, detail):
    return JsonResponse({"error": code, "detail": detail}, status=status)
