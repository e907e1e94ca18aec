"""SLUICE_KINDS: each kind of event, its class, channels, templates and what its users may choose, validated."""

import re
from dataclasses import dataclass

from django.core.exceptions import ImproperlyConfigured
from django.utils.functional import Promise

from pipeline.conf import inbox as conf_inbox
from pipeline.conf.validate import NAME, flag
from pipeline.conf.validate import mapping as _mapping
from pipeline.conf.validate import positive_int as _positive_int

# The classes of events, most urgent first: each has its own queue, workers and answer when its queue is full.
CLASSES = ("critical", "routine", "background")

MODES = ("instant", "digest", "off")


@dataclass(frozen=True)
class Throttle:
    """At most ``max`` events of a kind per user in any ``per_s`` seconds; the rest fold into the digest."""

    max: int
    per_s: int


@dataclass(frozen=True)
class Kind:
    """What a kind of event is: its class, its channels, its templates, and what its users may choose."""

    name: str
    klass: str
    channels: tuple
    template: str
    digest_template: str
    # A group of kinds a user can set at once ("tasks", "meetings"); "" for none.
    category: str = ""
    # The mode of a user who set nothing: "instant" (sent on its own, folded only when the queue is full) or
    # "digest" (always folded).
    default_mode: str = "instant"
    # A user cannot turn it off nor into a digest (a sign-in code); quiet hours, cadence and throttle never hold it.
    mandatory: bool = False
    throttle: Throttle | None = None
    # A message of this kind not sent within this many seconds of its event is never sent (a sign-in code).
    expires_after_s: int | None = None
    # How its folds go out at a flush: "user" (the default) inside the user's one digest per channel, "kind" in a
    # digest of their own per user and kind, "entity" one message per fold key (digest.grouping).
    digest_group: str = "user"
    # A link to one entity, in its digest and its inbox item ("https://app.example.com/tasks/{entity_id}"): a
    # template of entity_id, kind and top-level payload fields; "" for none.
    url: str = ""
    # (after_s, channels) when an inbox item still unread after after_s is sent on those channels once
    # (notifications.inbox.escalation).
    escalate: tuple | None = None
    # How much earlier than its send_at a scheduled send of this kind may go out (notifications.scheduling): a
    # critical kind's reservation looks for room in that window.
    schedule_window_s: int = 0
    # What people read for the kind ("Invoice paid"), never its key: the kind's ``title``, a string or a lazy
    # translation (gettext_lazy), else its name in words ("invoice.paid" -> "Invoice paid").
    title: object = ""


def kinds(raw, channels):
    """SLUICE_KINDS resolved against the resolved ``channels``: {name: Kind}."""
    kinds = {}
    for name, conf in _mapping(raw, "SLUICE_KINDS").items():
        setting = f"SLUICE_KINDS['{name}']"
        if not isinstance(name, str) or not NAME.fullmatch(name):
            raise ImproperlyConfigured(
                f"SLUICE_KINDS has a bad kind name {name!r}: up to 100 letters, digits and . _ : -"
            )
        conf = _mapping(conf, setting)
        klass = conf.get("class")
        if klass not in CLASSES:
            raise ImproperlyConfigured(f"{setting}['class'] must be one of {list(CLASSES)}, got {klass!r}")
        names = conf.get("channels")
        if not isinstance(names, (list, tuple)) or not names:
            raise ImproperlyConfigured(f"{setting}['channels'] must be a non-empty list")
        missing = [c for c in names if c not in channels]
        if missing:
            raise ImproperlyConfigured(f"{setting}['channels'] names channels not in SLUICE_CHANNELS: {missing}")
        extra = set(conf) - KIND_KEYS
        if extra:
            raise ImproperlyConfigured(f"{setting} has unknown keys {sorted(extra)}")
        slug = name.replace(".", "_")
        expires = conf.get("expires_after_s")
        kinds[name] = Kind(
            name=name,
            klass=klass,
            channels=tuple(names),
            template=conf.get("template", f"sluice/{slug}.txt"),
            digest_template=conf.get("digest_template", f"sluice/digest/{slug}.txt"),
            category=_category(conf.get("category", ""), setting),
            default_mode=_default_mode(conf.get("default_mode", "instant"), klass, setting),
            mandatory=flag(conf.get("mandatory", False), f"{setting}['mandatory']"),
            throttle=_throttle(conf.get("throttle"), klass, setting),
            expires_after_s=None if expires is None else _positive_int(expires, f"{setting}['expires_after_s']"),
            digest_group=_digest_group(conf.get("digest_group", "user"), setting),
            url=_url_template(conf.get("url", ""), setting),
            escalate=conf_inbox.escalate(conf.get("escalate"), f"{setting}['escalate']", names, channels),
            schedule_window_s=schedule_window(conf.get("schedule_window_s", 0), f"{setting}['schedule_window_s']"),
            title=_title(conf.get("title"), name, setting),
        )
    return kinds


KIND_KEYS = {
    "class",
    "channels",
    "template",
    "digest_template",
    "category",
    "default_mode",
    "mandatory",
    "throttle",
    "expires_after_s",
    "digest_group",
    "url",
    "escalate",
    "schedule_window_s",
    "title",
}

DIGEST_GROUPS = ("user", "kind", "entity")
# A kind's schedule_window_s at most: a critical kind's reservation looks at this many seconds for room.
MAX_WINDOW_S = 3600


def schedule_window(value, setting):
    """A kind's ``schedule_window_s``: how much earlier than its send_at a scheduled send may go out, 0 to
    MAX_WINDOW_S."""
    found = _positive_int(value, setting, minimum=0)
    if found > MAX_WINDOW_S:
        raise ImproperlyConfigured(f"{setting} must be at most {MAX_WINDOW_S}, got {value!r}")
    return found


# The fields a kind's url template may name: {entity_id}, {kind}, or a top-level payload field.
URL_FIELD = re.compile(r"\{([^{}]*)\}")
# The scheme and authority of a URL template: "https://host:port", or a scheme-relative "//host" (browsers read
# "/\host" the same), up to the path, the query or the fragment.
URL_ORIGIN = re.compile(r"^(?:https?:)?[/\\]{2}[^/\\?#]*", re.I)


def _digest_group(value, setting):
    if value not in DIGEST_GROUPS:
        raise ImproperlyConfigured(f"{setting}['digest_group'] must be one of {list(DIGEST_GROUPS)}, got {value!r}")
    return value


def _url_template(value, setting):
    """A kind's ``url``: a link to one entity in its digest and its inbox item, a template of {entity_id}, {kind}
    and top-level payload fields ("" for none)."""
    if not isinstance(value, str) or len(value) > 2000:
        raise ImproperlyConfigured(f"{setting}['url'] must be a URL template of up to 2,000 characters, got {value!r}")
    # Never a scheme of the entity's choosing ("{entity_id}" alone could make a javascript: link in the bell).
    if value and not value.startswith(("/", "https://", "http://")):
        raise ImproperlyConfigured(f"{setting}['url'] must start with '/', 'https://' or 'http://', got {value!r}")
    bad = [name for name in URL_FIELD.findall(value) if not re.fullmatch(r"\w+", name)]
    if bad:
        raise ImproperlyConfigured(f"{setting}['url'] names fields as {{entity_id}} or {{payload_field}}, got {bad}")
    origin = URL_ORIGIN.match(value)
    if origin and "{" in origin[0]:
        # The fields are the caller's: a token's payload, the event's entity id. In the host, or where a browser
        # reads one ("//host/", "/\host/"), they would let whoever sends the event point its link at any site.
        raise ImproperlyConfigured(
            f"{setting}['url'] has a field in its scheme and host ({origin[0]!r}): the fields come from the event's "
            "sender, so only the path, query and fragment may name them; write the host out"
        )
    return value


def _title(value, name, setting):
    """A kind's ``title``: a line of up to 200 characters, or a lazy translation; its name in words without one."""
    if value is None:
        words = re.sub(r"[._:-]+", " ", name).strip()
        return words[:1].upper() + words[1:]
    if isinstance(value, Promise):
        return value  # gettext_lazy("Invoice paid"): translated where it is read, in the recipient's language
    if not isinstance(value, str) or not value.strip() or len(value) > 200 or "\n" in value or "\r" in value:
        raise ImproperlyConfigured(f"{setting}['title'] must be one line of 1 to 200 characters, got {value!r}")
    return value


def _category(value, setting):
    if not isinstance(value, str) or len(value) > 100 or ":" in value:
        raise ImproperlyConfigured(f"{setting}['category'] must be a name of up to 100 characters, got {value!r}")
    return value


def _default_mode(value, klass, setting):
    allowed = ("instant",) if klass == "critical" else ("instant", "digest")
    if value not in allowed:
        raise ImproperlyConfigured(f"{setting}['default_mode'] must be one of {list(allowed)}, got {value!r}")
    return value


def _throttle(raw, klass, setting):
    if raw is None:
        return None
    if klass == "critical":
        # A throttled event folds into the digest, and critical never folds.
        raise ImproperlyConfigured(f"{setting}['throttle'] is not for a critical kind: critical never folds")
    raw = _mapping(raw, f"{setting}['throttle']")
    if set(raw) != {"max", "per_s"}:
        raise ImproperlyConfigured(f"{setting}['throttle'] takes exactly 'max' and 'per_s', got {sorted(raw)}")
    return Throttle(
        max=_positive_int(raw["max"], f"{setting}['throttle']['max']"),
        per_s=_positive_int(raw["per_s"], f"{setting}['throttle']['per_s']"),
    )
