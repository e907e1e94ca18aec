"""A generic HTTP provider (Twilio-style SMS, FCM-style push): a URL, auth headers, a body template, and the status
codes that mean transient or permanent; its timeout never runs past the send's deadline."""

import http.client
import json
import re
from urllib.parse import urlencode

from django.contrib.auth import get_user_model
from django.core.exceptions import FieldDoesNotExist, ImproperlyConfigured
from django.utils.module_loading import import_string

from . import deadline_http
from .base import BaseChannel, PermanentSendError, TransientSendError

PLACEHOLDER = re.compile(r"\{(\w+)\}")
HEADER_VALUE = re.compile(r"[^\x00-\x08\x0a-\x1f\x7f]*")
FIELDS = ("id", "recipient", "subject", "body", "kind", "channel", "class", "entity_id")
# A provider's answer about the message itself (a malformed number, an unregistered device token): no retry and no
# other provider can help. Every other answer that is not 2xx counts as transient, unless listed below.
PERMANENT_STATUSES = (400, 404, 410, 422)
TRANSIENT_STATUSES = (401, 403, 408, 409, 425, 429, 500, 502, 503, 504)
DEFAULT_TIMEOUT_S = 5.0
DEFAULT_CALLBACK = {
    "message_id_field": "message_id",
    "status_field": "status",
    "statuses": {"delivered": "delivered", "undelivered": "failed", "failed": "failed"},
}


class HttpProviderChannel(BaseChannel):
    """Options:

    - ``url`` (required), ``method`` ("POST"), ``format``: "json" (default) or "form";
    - ``body``: the body, a dict (nested for JSON) whose strings may hold {id}, {recipient}, {subject}, {body},
      {kind}, {channel}, {class} and {entity_id}; ``headers``: static headers (an Authorization, say);
      ``auth``: the dotted path of a callable returning headers, for tokens that expire (FCM's OAuth);
    - ``recipient`` (required): "user.<field>", "payload.<field>", or the dotted path of a callable(message);
      ``payload_recipient_kinds``: with "payload.<field>", the only kinds that may name their recipient in the
      payload (a list; unset: every kind); any other kind's send is refused (a permanent failure);
    - ``timeout_s`` (5, never past the send's deadline); ``permanent_statuses``, ``transient_statuses``;
    - ``message_id_field``: where the answer's JSON holds the provider's message id ("sid", "name", "a.b");
    - ``idempotency_header`` ("Idempotency-Key"; None to send none), given the notification id;
    - ``status_callback``: ``basic_auth`` ("user:password" or a list), ``message_id_field``, ``status_field`` and
      ``statuses`` (the provider's status -> sent, delivered or failed) for notifications.delivery.callbacks.
    """

    def __init__(self, name, **options):
        super().__init__(name, **options)
        where = f"HttpProviderChannel {name!r}"
        self.url = options.get("url")
        if not isinstance(self.url, str) or not self.url.startswith(("http://", "https://")):
            raise ImproperlyConfigured(f"{where}: options['url'] must be an http(s) URL")
        self.method = str(options.get("method", "POST")).upper()
        self.format = options.get("format", "json")
        if self.format not in ("json", "form"):
            raise ImproperlyConfigured(f"{where}: options['format'] must be 'json' or 'form'")
        self.body = options.get("body", {"to": "{recipient}", "body": "{body}"})
        unknown = set(_placeholders(self.body)) - set(FIELDS)
        if unknown:
            raise ImproperlyConfigured(f"{where}: the body template names unknown fields {sorted(unknown)}")
        self.headers = dict(options.get("headers") or {})
        self.auth = import_string(options["auth"]) if options.get("auth") else None
        self.recipient = _recipient(options.get("recipient"), where)
        kinds = options.get("payload_recipient_kinds")
        if kinds is not None and (not isinstance(kinds, (list, tuple)) or not all(isinstance(k, str) for k in kinds)):
            raise ImproperlyConfigured(f"{where}: options['payload_recipient_kinds'] must be a list of kinds")
        from_payload = str(options.get("recipient")).startswith("payload.")
        # Whoever may send a kind names the number itself when the payload holds it (SMS pumping): a list of the
        # kinds allowed to.
        self.payload_recipient_kinds = frozenset(kinds) if kinds is not None and from_payload else None
        self.timeout_s = float(options.get("timeout_s", DEFAULT_TIMEOUT_S))
        self.permanent = frozenset(options.get("permanent_statuses", PERMANENT_STATUSES))
        self.transient = frozenset(options.get("transient_statuses", TRANSIENT_STATUSES))
        if self.permanent & self.transient:
            raise ImproperlyConfigured(f"{where}: statuses {sorted(self.permanent & self.transient)} are in both lists")
        self.message_id_field = options.get("message_id_field")
        self.idempotency_header = options.get("idempotency_header", "Idempotency-Key")
        self.callback = callback_options(options.get("status_callback"), where)

    def send(self, message):
        timeout = message.time_left(self.timeout_s)
        if timeout <= 0:
            raise TransientSendError("no time left in the send budget")
        if self.payload_recipient_kinds is not None and message.kind not in self.payload_recipient_kinds:
            raise PermanentSendError(
                f"kind {message.kind!r} may not name its recipient in the payload on this provider"
            )
        recipient = self.recipient(message)
        if not recipient:
            raise PermanentSendError("the message has no recipient for this provider")
        values = {
            "id": message.id,
            "recipient": str(recipient),
            "subject": message.subject,
            "body": message.body,
            "kind": message.kind,
            "channel": message.channel,
            "class": message.klass,
            "entity_id": message.entity_id,
        }
        filled = _fill(self.body, values)
        if self.format == "json":
            data, content_type = json.dumps(filled, ensure_ascii=False).encode(), "application/json"
        else:
            data, content_type = urlencode(filled).encode(), "application/x-www-form-urlencoded"
        # A token read from a file often ends in a newline: trimmed. Any other line break or control character would
        # make http.client refuse the header quoting its value (the token) into the error, the log and the dead
        # letter: refused here naming the header only.
        auth = {name: str(value).strip() for name, value in (self.auth() if self.auth else {}).items()}
        headers = {"Content-Type": content_type, **self.headers, **auth}
        for name, value in headers.items():
            if not HEADER_VALUE.fullmatch(str(value)):
                raise TransientSendError(f"the {name!r} header has a line break or a control character (not shown)")
        if self.idempotency_header:
            headers[self.idempotency_header] = message.id
        try:
            response = deadline_http.request(self.method, self.url, data, headers, timeout)
        except deadline_http.Unreached as exc:
            raise TransientSendError(f"provider unreachable: {exc}") from exc
        except deadline_http.TimedOut as exc:
            raise TransientSendError(f"provider timed out: {exc}") from exc
        except OSError as exc:
            raise TransientSendError(f"provider connection failed: {type(exc).__name__}: {exc}") from exc
        except http.client.HTTPException as exc:
            raise TransientSendError(f"provider answer unreadable: {type(exc).__name__}") from exc
        if 200 <= response.status < 300:
            return self._message_id(response.body)
        if response.status in self.permanent:
            raise PermanentSendError(f"provider refused the message: HTTP {response.status}")
        raise TransientSendError(f"provider answered HTTP {response.status}")

    def _message_id(self, body):
        if not self.message_id_field:
            return None
        try:
            found = json.loads(body)
        except ValueError:
            return None
        for part in self.message_id_field.split("."):
            found = found.get(part) if isinstance(found, dict) else None
        return str(found)[:255] if isinstance(found, (str, int)) and not isinstance(found, bool) else None


def callback_options(raw, where):
    """The status callback's options, checked; None when the provider sends no callbacks."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise ImproperlyConfigured(f"{where}: options['status_callback'] must be a dict")
    conf = {**DEFAULT_CALLBACK, **raw}
    auth = conf.get("basic_auth")
    auth = [auth] if isinstance(auth, str) else auth
    if not auth or not all(isinstance(a, str) and ":" in a and len(a) >= 8 for a in auth):
        raise ImproperlyConfigured(
            f"{where}: options['status_callback']['basic_auth'] must be 'user:password' (or a list of them, to "
            "rotate), at least 8 characters: callbacks are never accepted unauthenticated"
        )
    statuses = conf["statuses"]
    if not isinstance(statuses, dict) or not set(statuses.values()) <= {"sent", "delivered", "failed"}:
        raise ImproperlyConfigured(f"{where}: status_callback['statuses'] maps to 'sent', 'delivered' or 'failed'")
    return {**conf, "basic_auth": list(auth)}


def _recipient(spec, where):
    if not isinstance(spec, str) or not spec:
        raise ImproperlyConfigured(
            f"{where}: options['recipient'] is required: 'user.<attribute>', 'payload.<field>' or a callable's path"
        )
    source, _, name = spec.partition(".")
    if source == "payload" and name:
        return lambda message: message.payload.get(name) if isinstance(message.payload, dict) else None
    if source == "user" and name.isidentifier():
        try:
            get_user_model()._meta.get_field(name)
        except FieldDoesNotExist:
            raise ImproperlyConfigured(f"{where}: options['recipient'] names a field the user model lacks") from None

        def from_user(message):
            User = get_user_model()
            return User._default_manager.filter(pk=message.user_id).values_list(name, flat=True).first()

        return from_user
    return import_string(spec)


def _placeholders(template):
    if isinstance(template, str):
        yield from PLACEHOLDER.findall(template)
    elif isinstance(template, dict):
        for value in template.values():
            yield from _placeholders(value)
    elif isinstance(template, (list, tuple)):
        for value in template:
            yield from _placeholders(value)


def _fill(template, values):
    # Substitution, not str.format: a value that contains braces is never read as a placeholder in turn.
    if isinstance(template, str):
        return PLACEHOLDER.sub(lambda found: values[found[1]], template)
    if isinstance(template, dict):
        return {key: _fill(value, values) for key, value in template.items()}
    if isinstance(template, (list, tuple)):
        return [_fill(value, values) for value in template]
    return template
