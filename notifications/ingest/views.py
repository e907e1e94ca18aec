"""POST /api/notifications/: authenticate, rate-limit, read the JSON body, then notify() and answer in JSON.

An Idempotency-Key header makes a retry safe: a repeat within SLUICE_IDEMPOTENCY_TTL_S answers what the first
call answered, with Idempotent-Replayed: true, and publishes nothing (docs/ingest.md).
"""

import json
import logging
import math
import traceback
from datetime import UTC, datetime

from django.http import JsonResponse
from django.views.decorators.csrf import csrf_exempt
from kombu.exceptions import OperationalError as BrokerError
from redis.exceptions import BusyLoadingError, OutOfMemoryError, ReadOnlyError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from notifications import exceptions
from notifications.topic_names import MAX_TOPIC_LENGTH
from pipeline.conf import sluice_settings

from . import many
from .auth import AuthenticationFailed, authenticate
from .ratelimit import charge_users, take

logger = logging.getLogger("sluice.ingest")

REQUIRED = ("kind", "entity_id")
# One of these names who gets it: one user, many (notifications.ingest.many), or a topic's subscribers.
RECIPIENTS = ("user", "users", "topic")
FIELDS = ("user", "users", "topic", *REQUIRED, "payload", "send_at", "key")
# Room in the body for the other fields, and for a client's \uXXXX escapes, which can double the payload's
# size against the UTF-8 JSON that SLUICE_MAX_PAYLOAD_BYTES measures. notify() then checks the payload exactly.
BODY_MARGIN_BYTES = 4096
OUTAGE_RETRY_AFTER_S = 5
IDEMPOTENCY_HEADER = "Idempotency-Key"
# Set on the answer to a request whose Idempotency-Key was seen before (the first answer, given again).
REPLAYED_HEADER = "Idempotent-Replayed"
MAX_DETAIL_CHARS = 500
# Most specific first: PayloadTooLarge is an InvalidPayload.
NOTIFY_ERRORS = (
    (exceptions.InvalidIdempotencyKey, 400, "invalid_idempotency_key"),
    (exceptions.PayloadTooLarge, 413, "payload_too_large"),
    (exceptions.InvalidPayload, 400, "invalid_payload"),
    (exceptions.UnknownKind, 400, "unknown_kind"),
    (exceptions.UnknownUser, 400, "unknown_user"),
    (exceptions.InvalidEntityId, 400, "invalid_entity_id"),
    (exceptions.InvalidSchedule, 400, "invalid_schedule"),
    (exceptions.InvalidTopic, 400, "invalid_topic"),
    (exceptions.ScheduleFull, 409, "schedule_full"),
    (exceptions.NotifyError, 400, "invalid_notification"),
)
# Redis at its memory limit (noeviction), a replica that became read-only, or one still loading its data set
# cannot take the event now, and may later: 503, as for an outage, never a 500.
OUTAGES = (
    RedisConnectionError,
    RedisTimeoutError,
    OutOfMemoryError,
    ReadOnlyError,
    BusyLoadingError,
    BrokerError,
    exceptions.QueueCeilingReached,
    exceptions.Unavailable,
)


class Refusal(Exception):
    """An answer other than 202: status, error code, a detail for the client, extra headers and body fields."""

    def __init__(self, status, code, detail, headers=None, extra=None):
        super().__init__(detail)
        self.status, self.code, self.detail, self.headers = status, code, detail, headers or {}
        self.extra = extra or {}


def body_limit():
    """The largest request body read, in bytes."""
    return 2 * sluice_settings().max_payload_bytes + BODY_MARGIN_BYTES


@csrf_exempt  # Safe because only the Authorization header authenticates: a browser never sends it by itself.
def ingest(request):
    """Publish one notification for another service, to one user or many; see docs/ingest.md."""
    from notifications.api import answer_unknown_user, notify_in_scope

    token = event = None
    try:
        if request.method != "POST":
            raise Refusal(405, "method_not_allowed", "use POST", {"Allow": "POST"})
        token = _authenticate(request)
        _rate_limit(token)
        idempotency_key = _idempotency_key(request)
        event = _read_event(request)
        _check_scope(token, event)
        fields = dict(
            entity_id=_namespaced(token, event["entity_id"]),
            payload=event.get("payload"),
            idempotency_key=idempotency_key,
            **_schedule_fields(event),
        )
        if "topic" in event:
            return _topic(token, event, fields)
        if "users" in event:
            return _fan_out(token, event, fields)
        try:
            published = notify_in_scope(idempotency_scope(token), event["user"], event["kind"], **fields)
        except exceptions.UnknownUser:
            if token.reveal_details or not _well_formed_pk(event["user"]):
                raise
            # The same answer as for a user who exists, its Idempotency-Key recorded and replayed alike: a token may
            # not learn which user ids do. The log says it.
            _log_refusal(token, "unknown_user", logging.INFO)
            published = answer_unknown_user(idempotency_scope(token), event["kind"], **fields)
    except Refusal as refusal:
        return _refuse(token, refusal)
    except exceptions.UnknownUser as exc:
        return _refuse(token, Refusal(400, "unknown_user", str(exc)))
    except exceptions.NotifyError as exc:
        status, code = next((s, c) for cls, s, c in NOTIFY_ERRORS if isinstance(exc, cls))
        return _refuse(token, Refusal(status, code, str(exc)))
    except exceptions.Rejected as exc:
        if exc.available_at is not None or "send_at" in (event or {}):
            # A scheduled send with no room in its window: retrying the same request would find none either.
            body = {"available_at": _rfc3339(exc.available_at)} if exc.available_at else {}
            return _refuse(token, Refusal(409, "rejected", str(exc), extra=body))
        headers = {"Retry-After": str(_seconds(exc.retry_after))}
        return _refuse(token, Refusal(503, "rejected", str(exc), headers))
    except OUTAGES:
        detail = "the notification service is temporarily unavailable; retry later"
        return _refuse(token, Refusal(503, "unavailable", detail, {"Retry-After": str(OUTAGE_RETRY_AFTER_S)}))
    except Exception as exc:  # noqa: BLE001 - the client gets a plain 500, the log gets the stack
        # The frames, not the message: an exception's message may carry a user id or the payload.
        logger.error(
            "ingest token=%s error=internal exception=%s\n%s",
            _name(token),
            type(exc).__qualname__,
            "".join(traceback.format_tb(exc.__traceback__)).rstrip(),
        )
        return _json(500, {"error": "internal", "detail": "internal error; it has been logged"})
    # A replay's answer is made from the recorded outcome exactly as the first call's was: the same status and body.
    answer = {"outcome": str(published.outcome) if token.reveal_details else "accepted"}
    if token.reveal_details and getattr(published, "due_at", None) is not None:
        answer.update(moved=published.moved, previous_sent=published.previous_sent, due_at=_rfc3339(published.due_at))
    response = _json(202, answer)
    if published.replayed:
        response[REPLAYED_HEADER] = "true"
    return response


def _fan_out(token, event, fields):
    """The answer to a request for many users: notify_many() for them, the token charged a request per user."""
    from notifications.api import notify_many_in_scope

    try:
        users = many.users_of(event, _well_formed_pk)
    except many.BadUsers as exc:
        raise Refusal(400, "invalid_request", str(exc)) from None
    charge_users(token, len(users))
    scope = idempotency_scope(token)
    fanned = notify_many_in_scope(scope, users, event["kind"], reveal=token.reveal_details, **fields)
    response = _json(202, many.answer(token, fanned))
    if fanned.retry_after is not None:
        response["Retry-After"] = str(_seconds(fanned.retry_after))
    return response


def _topic(token, event, fields):
    """The answer to a request for a topic's subscribers: notify_topic() for the topic in the token's service namespace,
    202 with its job and how many subscribers it has. The token is charged one request a job: the fan-out runs in
    bounded steps on its class's pool, whatever the topic's size."""
    from notifications import notify_topic_in_scope

    job = notify_topic_in_scope(
        idempotency_scope(token), _namespaced_topic(token, event["topic"]), event["kind"], **fields
    )
    response = _json(202, {"job": job.pk, "topic": event["topic"], "subscribers": job.subscribers})
    if job.replayed:
        response[REPLAYED_HEADER] = "true"
    return response


def _namespaced_topic(token, topic):
    """The topic in the token's service namespace ("<service>:<topic>"), as its entity ids are; a topic that
    notify_topic() refuses anyway is passed as it is, to get its answer."""
    if not isinstance(topic, str) or not topic.strip():
        return topic
    namespaced = token.namespaced(topic)
    if len(namespaced) > MAX_TOPIC_LENGTH:
        room = max(0, MAX_TOPIC_LENGTH - (len(namespaced) - len(topic)))
        raise exceptions.InvalidTopic(
            f"topic is {len(topic)} characters; the limit for this token is {room} "
            f"({MAX_TOPIC_LENGTH} less the service namespace {token.service!r})"
        )
    return namespaced


def idempotency_scope(token):
    """The scope of a token's idempotency keys: its service's, shared by the service's tokens (as its entity
    namespace is), so a retry sent with a rotated token is still recognised, and no two services collide."""
    return f"ingest:{token.service}"


def _idempotency_key(request):
    """The Idempotency-Key header's value, or None without one; a malformed one is a 400 naming the header."""
    from notifications.api import check_idempotency_key

    if IDEMPOTENCY_HEADER not in request.headers:
        return None
    try:
        return check_idempotency_key(request.headers[IDEMPOTENCY_HEADER], f"the {IDEMPOTENCY_HEADER} header")
    except exceptions.InvalidIdempotencyKey as exc:
        raise Refusal(400, "invalid_idempotency_key", str(exc)) from None


def _check_scope(token, event):
    """403 unless the token may send this kind and these payload fields. The answer for a kind outside the
    token's scope is the same whether the kind exists or not."""
    kind = event["kind"]
    if not token.allows(kind):
        raise Refusal(403, "kind_not_allowed", f"this token may not send kind {_short(repr(kind))}")
    extra = token.fields_not_allowed(event.get("payload"))
    if extra:
        names = _short(", ".join(repr(name) for name in extra))
        raise Refusal(403, "payload_field_not_allowed", f"this token may not send payload field(s) {names}")


def _namespaced(token, entity_id):
    """The entity id in the token's service namespace, so that no service folds into another's digests.

    An entity id notify() would refuse anyway (empty, not a string) is passed as it is, to get notify()'s answer.
    """
    if isinstance(entity_id, int) and not isinstance(entity_id, bool):
        try:
            entity_id = str(entity_id)
        except ValueError:  # too many digits to convert: notify() says so
            return entity_id
    if not isinstance(entity_id, str) or not entity_id.strip():
        return entity_id
    namespaced = token.namespaced(entity_id)
    limit = sluice_settings().max_entity_id_length
    if len(namespaced) > limit:
        room = max(0, limit - (len(namespaced) - len(entity_id)))
        raise Refusal(
            400,
            "invalid_entity_id",
            f"entity_id is {len(entity_id)} characters; the limit for this token is {room} "
            f"(SLUICE_MAX_ENTITY_ID_LENGTH, {limit}, less the service namespace {token.service!r})",
        )
    return namespaced


def _schedule_fields(event):
    """notify()'s send_at and key from the body: send_at an RFC 3339 time with its offset ("2026-12-03T09:50:00Z")."""
    fields = {}
    if "key" in event:
        fields["key"] = event["key"]
    if "send_at" in event:
        raw = event["send_at"]
        try:
            when = datetime.fromisoformat(raw) if isinstance(raw, str) else None
        except ValueError:
            when = None
        if when is None or when.tzinfo is None:
            detail = f"send_at must be an RFC 3339 time with its offset, got {_short(repr(raw))}"
            raise exceptions.InvalidSchedule(detail)
        fields["send_at"] = when
    return fields


def _rfc3339(seconds):
    return datetime.fromtimestamp(seconds, UTC).isoformat().replace("+00:00", "Z")


def _well_formed_pk(user):
    return isinstance(user, (int, str)) and not isinstance(user, bool)


def _authenticate(request):
    try:
        return authenticate(request)
    except AuthenticationFailed as exc:
        challenge = 'Bearer error="invalid_token"' if "Authorization" in request.headers else "Bearer"
        raise Refusal(401, "unauthorized", str(exc), {"WWW-Authenticate": challenge}) from None


def _rate_limit(token):
    wait = take(token)
    if wait:
        detail = f"over this token's limit of {token.rate_per_second:g} requests/s (burst {token.burst})"
        raise Refusal(429, "rate_limited", detail, {"Retry-After": str(_seconds(wait))})


def _read_event(request):
    data = _read_json(request)
    missing = [f for f in REQUIRED if f not in data]
    if not any(f in data for f in RECIPIENTS):
        missing.insert(0, "user (or users, or topic)")
    if "topic" in data and ("user" in data or "users" in data):
        raise Refusal(400, "invalid_request", 'give "topic" or "user"/"users", not both')
    if missing:
        raise Refusal(400, "invalid_request", f"missing field(s): {', '.join(missing)}")
    unknown = sorted(repr(f) for f in data if f not in FIELDS)
    if unknown:
        raise Refusal(400, "invalid_request", _short(f"unknown field(s) {', '.join(unknown)}; the fields are {FIELDS}"))
    return data


def _read_json(request):
    """The request's body: a JSON object, read within body_limit(); a Refusal naming what is wrong otherwise."""
    if request.content_type != "application/json":
        raise Refusal(415, "unsupported_media_type", "the body must be JSON, sent as Content-Type: application/json")
    if request.content_params.get("charset", "utf-8").lower() not in ("utf-8", "utf8"):
        raise Refusal(415, "unsupported_media_type", "the body must be UTF-8 JSON")
    limit = body_limit()
    try:
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        raise Refusal(400, "invalid_request", "Content-Length is not a number") from None
    if declared > limit:
        raise Refusal(413, "body_too_large", f"the body is {declared} bytes; the limit is {limit}")
    try:
        body = request.read(limit + 1)
    except OSError:
        raise Refusal(400, "invalid_request", "the body could not be read") from None
    if len(body) > limit:
        raise Refusal(413, "body_too_large", f"the body is over the limit of {limit} bytes")
    data = _parse(body)
    if not isinstance(data, dict):
        raise Refusal(400, "invalid_request", f"the body must be a JSON object, got {_json_type(data)}")
    return data


def _parse(body):
    if not body:
        raise Refusal(400, "invalid_json", "the body is empty")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Refusal(400, "invalid_json", f"the body is not UTF-8: {exc.reason} at byte {exc.start}") from None
    try:
        return json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        raise Refusal(400, "invalid_json", "the body is nested too deeply") from None
    except ValueError as exc:
        raise Refusal(400, "invalid_json", _short(f"the body is not valid JSON: {exc}")) from None


def _no_constant(name):
    raise ValueError(f"{name} is not JSON")


def _json_type(value):
    names = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}
    return names.get(type(value), "a number")


def _log_refusal(token, code, level):
    logger.log(level, "ingest token=%s error=%s", _name(token), code)


def _refuse(token, refusal):
    _log_refusal(token, refusal.code, logging.WARNING if refusal.status >= 500 else logging.INFO)
    response = _json(refusal.status, {"error": refusal.code, "detail": _short(refusal.detail), **refusal.extra})
    for header, value in refusal.headers.items():
        response[header] = value
    return response


def _json(status, body):
    response = JsonResponse(body, status=status)
    response["Cache-Control"] = "no-store"
    return response


def _seconds(value):
    """Whole seconds for Retry-After: rounded up, at least 1."""
    try:
        return max(1, math.ceil(value))
    except (TypeError, ValueError, OverflowError):
        return OUTAGE_RETRY_AFTER_S


def _short(text):
    return text if len(text) <= MAX_DETAIL_CHARS else text[: MAX_DETAIL_CHARS - 1] + "…"


def _name(token):
    return token.name if token is not None else "-"
