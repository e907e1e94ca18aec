"""The one resolver for SLUICE_ settings: read, validate, and cache them as plain objects."""

from dataclasses import dataclass, field
from functools import lru_cache

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed
from django.dispatch import receiver
from django.utils.module_loading import import_string

CLASSES = ("critical", "routine", "background")

DEFAULT_KINDS = {
    "meeting.reminder": {"class": "critical", "channels": ["push", "email"]},
    "meeting.cancelled": {"class": "critical", "channels": ["push", "email"]},
    "meeting.invitation": {"class": "critical", "channels": ["email"]},
    "task.assigned": {"class": "routine", "channels": ["email", "push"]},
    "task.due_changed": {"class": "routine", "channels": ["email"]},
    "task.comment": {"class": "routine", "channels": ["email"]},
    "board.updated": {"class": "background", "channels": ["push"]},
    "meeting.participant_left": {"class": "background", "channels": ["push"]},
}

DEFAULT_QUEUE = {"capacity": 2048, "wait_ms": 0}
DEFAULT_DIGEST = {"flush_interval_s": 60, "max_keys": 200}


@dataclass(frozen=True)
class QueueConfig:
    """One class's Celery queue and its bound."""

    name: str
    capacity: int
    wait_ms: int
    # Hard ceiling above capacity that no publish may cross, not even one that skips admission.
    ceiling: int
    # Room for opted-out users' events while the queue is full (they are never folded).
    overflow: int


@dataclass(frozen=True)
class Kind:
    """What a kind of event is: its class, its channels and its templates."""

    name: str
    klass: str
    channels: tuple
    template: str
    digest_template: str


@dataclass(frozen=True)
class ChannelConfig:
    """A delivery channel: a dotted-path backend and its options."""

    name: str
    backend: str
    options: dict = field(default_factory=dict)


@dataclass(frozen=True)
class SluiceSettings:
    """Every SLUICE_ setting, validated."""

    queues: dict
    kinds: dict
    channels: dict
    max_payload_bytes: int
    max_entity_id_length: int
    digest: dict


def _positive_int(value, setting, minimum=1):
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ImproperlyConfigured(f"{setting} must be an integer >= {minimum}, got {value!r}")
    return value


def _mapping(value, setting):
    if not isinstance(value, dict):
        raise ImproperlyConfigured(f"{setting} must be a dict, got {type(value).__name__}")
    return value


def _queues(raw):
    raw = _mapping(raw, "SLUICE_QUEUES")
    unknown = set(raw) - set(CLASSES)
    if unknown:
        raise ImproperlyConfigured(f"SLUICE_QUEUES has unknown classes {sorted(unknown)}; use {list(CLASSES)}")
    queues = {}
    for klass in CLASSES:
        conf = {**DEFAULT_QUEUE, **_mapping(raw.get(klass, {}), f"SLUICE_QUEUES['{klass}']")}
        name = f"SLUICE_QUEUES['{klass}']"
        capacity = _positive_int(conf["capacity"], f"{name}['capacity']")
        wait_ms = _positive_int(conf["wait_ms"], f"{name}['wait_ms']", minimum=0)
        ceiling = _positive_int(conf.get("ceiling", capacity * 2), f"{name}['ceiling']")
        if ceiling < capacity:
            raise ImproperlyConfigured(f"{name}['ceiling'] ({ceiling}) must be >= its capacity ({capacity})")
        overflow = _positive_int(conf.get("overflow", capacity), f"{name}['overflow']", minimum=0)
        extra = set(conf) - {"capacity", "wait_ms", "ceiling", "overflow", "queue"}
        if extra:
            raise ImproperlyConfigured(f"{name} has unknown keys {sorted(extra)}")
        queue = conf.get("queue", klass)
        if not isinstance(queue, str) or not queue or queue == "celery":
            raise ImproperlyConfigured(f"{name}['queue'] must be a non-empty name other than 'celery'")
        queues[klass] = QueueConfig(name=queue, capacity=capacity, wait_ms=wait_ms, ceiling=ceiling, overflow=overflow)
    if len({q.name for q in queues.values()}) != len(CLASSES):
        raise ImproperlyConfigured("SLUICE_QUEUES must give each class its own queue")
    return queues


def _channels(raw):
    channels = {}
    for name, conf in _mapping(raw, "SLUICE_CHANNELS").items():
        setting = f"SLUICE_CHANNELS['{name}']"
        conf = _mapping(conf, setting)
        backend = conf.get("backend")
        if not isinstance(backend, str):
            raise ImproperlyConfigured(f"{setting}['backend'] must be a dotted path, got {backend!r}")
        try:
            import_string(backend)
        except ImportError as exc:
            raise ImproperlyConfigured(f"{setting}['backend'] cannot be imported: {exc}") from exc
        options = _mapping(conf.get("options", {}), f"{setting}['options']")
        channels[name] = ChannelConfig(name=name, backend=backend, options=dict(options))
    return channels


def _kinds(raw, channels):
    merged = {**DEFAULT_KINDS, **_mapping(raw, "SLUICE_KINDS")}
    kinds = {}
    for name, conf in merged.items():
        setting = f"SLUICE_KINDS['{name}']"
        if not isinstance(name, str) or not name or len(name) > 100:
            raise ImproperlyConfigured(f"SLUICE_KINDS has a bad kind name {name!r}")
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
        slug = name.replace(".", "_")
        kinds[name] = Kind(
            name=name,
            klass=klass,
            channels=tuple(names),
            template=conf.get("template", f"notifications/{slug}.txt"),
            digest_template=conf.get("digest_template", f"digest/{slug}.txt"),
        )
    return kinds


def _digest(raw):
    conf = {**DEFAULT_DIGEST, **_mapping(raw, "SLUICE_DIGEST")}
    return {
        "flush_interval_s": _positive_int(conf["flush_interval_s"], "SLUICE_DIGEST['flush_interval_s']"),
        "max_keys": _positive_int(conf["max_keys"], "SLUICE_DIGEST['max_keys']"),
    }


@lru_cache(maxsize=1)
def sluice_settings():
    """Return the validated settings; raise ImproperlyConfigured naming the bad setting."""
    channels = _channels(getattr(settings, "SLUICE_CHANNELS", {}))
    return SluiceSettings(
        queues=_queues(getattr(settings, "SLUICE_QUEUES", {})),
        kinds=_kinds(getattr(settings, "SLUICE_KINDS", {}), channels),
        channels=channels,
        max_payload_bytes=_positive_int(
            getattr(settings, "SLUICE_MAX_PAYLOAD_BYTES", 16 * 1024), "SLUICE_MAX_PAYLOAD_BYTES"
        ),
        max_entity_id_length=_positive_int(
            getattr(settings, "SLUICE_MAX_ENTITY_ID_LENGTH", 200), "SLUICE_MAX_ENTITY_ID_LENGTH"
        ),
        digest=_digest(getattr(settings, "SLUICE_DIGEST", {})),
    )


@receiver(setting_changed)
def _reset(setting, **kwargs):
    if setting.startswith("SLUICE_"):
        sluice_settings.cache_clear()
