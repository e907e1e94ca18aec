"""The one resolver for SLUICE_ settings: read, validate, and cache them as plain objects."""

import re
from dataclasses import dataclass, field
from functools import lru_cache

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed
from django.dispatch import receiver

from pipeline import conf_inbox, conf_providers
from pipeline.redis import addresses

from .conf_providers import BreakerConfig, ProviderConfig  # noqa: F401 - the resolver's types
from .validate import mapping as _mapping
from .validate import positive_int as _positive_int

CLASSES = ("critical", "routine", "background")
# Kind and channel names travel inside Redis keys, Lua arguments and JSON: plain characters only.
NAME = re.compile(r"[\w.:-]{1,100}")

DEFAULT_QUEUE = {"capacity": 2048, "wait_ms": 0}
# What an acknowledged admission promises (docs/reliability.md): "async", in the primary's memory (Redis replicates
# later); "replicated", confirmed by durability_replicas replicas (WAIT) within durability_timeout_ms.
DURABILITIES = ("async", "replicated")
# A replica on the same network confirms in about a millisecond; a tenth of a second covers a loaded one, and is
# what a caller waits at most before it hears Unavailable when none confirms.
DEFAULT_DURABILITY_TIMEOUT_MS = 100
# WAIT's timeout is the longest a notify() may block on it: past a few seconds a web request should hear Unavailable.
MAX_DURABILITY_TIMEOUT_MS = 5000
# How long one attempt of one channel's send may take, every provider of a failover included. Critical is
# short: a reminder that waits ten seconds on a provider is better sent through the next one, or retried.
DEFAULT_SEND_BUDGET_S = {"critical": 10, "routine": 30, "background": 30}
# The send claim (notifications.delivery.claims.CLAIM_TTL_S, 120 s) must outlive the attempt it guards.
MAX_SEND_BUDGET_S = 120
DEFAULT_DIGEST = {"flush_interval_s": 60, "max_keys": 200, "max_items": 20}
# A user's digest lists at most this many groups, whatever SLUICE_DIGEST["max_items"] says: the message's size
# stays bounded (each listed group carries its latest payload).
MAX_DIGEST_ITEMS = 200
# The most messages one send task of a class handles at once (notifications.delivery.engine): critical one at a
# time, so a reminder never waits behind another; routine a moderate batch; background a larger one, for bulk
# provider calls.
# Not 1,000 for background: bench batches measured 200 within noise of 1,000 per slot (each message's own claim,
# gate and record cost more than its share of a call by then), and a batch's messages leave the queue's bound.
DEFAULT_BATCH = {"critical": 1, "routine": 50, "background": 200}
MAX_BATCH = 10_000


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
    # The most one channel's send may take in one attempt, failover included: no provider timeout exceeds it.
    send_budget_s: int = 30
    # The Redis of this class: its queue (the broker of its pool), admission, folds, overflow, throttles, send
    # claims, dead letters and counters (SLUICE_QUEUES[class]["redis_url"], by default SLUICE_REDIS_URL).
    redis_url: str = ""
    # The most messages one send task takes from the queue and handles together (notifications.delivery.engine).
    batch: int = 1
    # "replicated": admission, a fold and a send's end wait (WAIT, in the same round trip) for this many replicas
    # to confirm within durability_timeout_ms (pipeline.durability); "async" returns once the primary has it.
    durability: str = "async"
    durability_replicas: int = 1
    durability_timeout_ms: int = DEFAULT_DURABILITY_TIMEOUT_MS

    @property
    def replicated(self):
        """Whether this class's writes are confirmed by replicas before they are acknowledged."""
        return self.durability == "replicated"


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


@dataclass(frozen=True)
class GateConfig:
    """A shared channel's limits, enforced across every worker by pipeline.gate."""

    rate_per_s: float | None
    burst: int
    concurrency: int | None
    # After the last critical send, lower classes keep waiting this long, so they cannot slip in
    # between two critical sends that come a moment apart ("flicker").
    hold_ms: int
    # Routine's guaranteed share of the channel's sends, even under continuous critical load.
    routine_min_share: float
    # A payload field whose value gets its own limits, such as a brand or a tenant.
    partition_by: str | None
    # How long a routine or background send waits for the channel before its message goes back to the
    # end of its queue, freeing the worker for sends on other channels.
    max_wait_ms: int
    # Each partition's own limits (by default the channel's). The channel's limits always hold for the whole
    # channel too, so distinct partition values never add up to more than the provider allows.
    partition_rate_per_s: float | None = None
    partition_burst: int | None = None
    partition_concurrency: int | None = None


@dataclass(frozen=True)
class ChannelConfig:
    """A delivery channel: a dotted-path backend, its options, and its limits (if any)."""

    name: str
    backend: str
    options: dict = field(default_factory=dict)
    gate: GateConfig | None = None
    # Ordered providers to fail over between (pipeline.breaker); empty for a channel with one ``backend``.
    providers: tuple = ()


@dataclass(frozen=True)
class SluiceSettings:
    """Every SLUICE_ setting, validated."""

    # The Redis that holds Sluice's queues and its coordination state; the broker of its Celery app.
    redis_url: str
    queues: dict
    kinds: dict
    channels: dict
    max_payload_bytes: int
    max_entity_id_length: int
    digest: dict
    gate_enabled: bool
    # Messages that cannot be sent are kept up to this many (pipeline.deadletters); then the oldest go.
    dead_letters_max: int
    # Delivery status records (sent, delivered, bounced ...) are pruned this many days after their send.
    delivery_retention_days: int = 30
    # The events one request to an ESP's tracking webhook may apply; the rest are counted and dropped.
    tracking_max_events: int = 500
    # SLUICE_INBOX: max_items per user and retention_days (pipeline.conf_inbox).
    inbox: dict = field(default_factory=lambda: conf_inbox.inbox({}))


def _queues(raw, default_url):
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
        budget = conf.get("send_budget_s", DEFAULT_SEND_BUDGET_S[klass])
        if _positive_int(budget, f"{name}['send_budget_s']") > MAX_SEND_BUDGET_S:
            raise ImproperlyConfigured(
                f"{name}['send_budget_s'] must be at most {MAX_SEND_BUDGET_S} (the send claim's lifetime), got {budget}"
            )
        batch = _batch(klass, conf.get("batch", DEFAULT_BATCH[klass]), f"{name}['batch']")
        extra = set(conf) - {
            "capacity",
            "wait_ms",
            "ceiling",
            "overflow",
            "queue",
            "send_budget_s",
            "batch",
            "redis_url",
            "durability",
            "durability_replicas",
            "durability_timeout_ms",
        }
        if extra:
            raise ImproperlyConfigured(f"{name} has unknown keys {sorted(extra)}")
        queue = conf.get("queue", klass)
        if not isinstance(queue, str) or not queue or queue == "celery":
            raise ImproperlyConfigured(f"{name}['queue'] must be a non-empty name other than 'celery'")
        url = conf.get("redis_url", default_url)
        queues[klass] = QueueConfig(
            name=queue,
            capacity=capacity,
            wait_ms=wait_ms,
            ceiling=ceiling,
            overflow=overflow,
            send_budget_s=budget,
            redis_url=_redis_url(url, f"{name}['redis_url']"),
            batch=batch,
            **_durability(conf, name),
        )
    if len({q.name for q in queues.values()}) != len(CLASSES):
        raise ImproperlyConfigured("SLUICE_QUEUES must give each class its own queue")
    return queues


def _durability(conf, name):
    """A class's durability, its replicas and its timeout, each checked by its own key."""
    durability = conf.get("durability", "async")
    if durability not in DURABILITIES:
        raise ImproperlyConfigured(f"{name}['durability'] must be one of {list(DURABILITIES)}, got {durability!r}")
    replicas = _positive_int(conf.get("durability_replicas", 1), f"{name}['durability_replicas']")
    timeout = conf.get("durability_timeout_ms", DEFAULT_DURABILITY_TIMEOUT_MS)
    # WAIT with a timeout of 0 blocks for ever: at least 1 ms.
    if _positive_int(timeout, f"{name}['durability_timeout_ms']") > MAX_DURABILITY_TIMEOUT_MS:
        raise ImproperlyConfigured(
            f"{name}['durability_timeout_ms'] must be at most {MAX_DURABILITY_TIMEOUT_MS}, got {timeout}"
        )
    return {"durability": durability, "durability_replicas": replicas, "durability_timeout_ms": timeout}


def _batch(klass, value, setting):
    batch = _positive_int(value, setting)
    if klass == "critical" and batch != 1:
        # A critical send never waits behind another one in a batch: its latency is the point of the class.
        raise ImproperlyConfigured(f"{setting} must be 1: critical sends go one at a time, got {batch!r}")
    if batch > MAX_BATCH:
        raise ImproperlyConfigured(f"{setting} must be at most {MAX_BATCH}, got {batch!r}")
    return batch


def _channels(raw):
    channels = {}
    for name, conf in _mapping(raw, "SLUICE_CHANNELS").items():
        setting = f"SLUICE_CHANNELS['{name}']"
        if not isinstance(name, str) or not NAME.fullmatch(name):
            raise ImproperlyConfigured(f"SLUICE_CHANNELS has a bad channel name {name!r}: letters, digits and . _ : -")
        conf = _mapping(conf, setting)
        if "providers" in conf:
            if "backend" in conf or "options" in conf:
                raise ImproperlyConfigured(f"{setting} takes either 'backend' (and 'options') or 'providers', not both")
            providers = conf_providers.providers(conf["providers"], conf.get("breaker", {}), setting)
            backend, options = "", {}
        else:
            if "breaker" in conf:
                raise ImproperlyConfigured(f"{setting}['breaker'] needs 'providers': a breaker guards providers")
            backend = conf_providers.backend_path(conf.get("backend"), f"{setting}['backend']")
            options, providers = _mapping(conf.get("options", {}), f"{setting}['options']"), ()
        extra = set(conf) - {"backend", "options", "providers", "breaker", *GATE_KEYS}
        if extra:
            raise ImproperlyConfigured(f"{setting} has unknown keys {sorted(extra)}")
        channels[name] = ChannelConfig(
            name=name, backend=backend, options=dict(options), gate=_gate(conf, setting), providers=providers
        )
    return channels


GATE_KEYS = (
    "rate_per_s",
    "burst",
    "concurrency",
    "hold_ms",
    "routine_min_share",
    "partition_by",
    "max_wait_ms",
    "partition_rate_per_s",
    "partition_burst",
    "partition_concurrency",
)
PARTITION_LIMITS = ("partition_rate_per_s", "partition_burst", "partition_concurrency")


def _gate(conf, setting):
    if all(conf.get(key) is None for key in ("rate_per_s", "concurrency", *PARTITION_LIMITS)):
        return None
    rate = conf.get("rate_per_s")
    if rate is not None and (isinstance(rate, bool) or not isinstance(rate, (int, float)) or rate <= 0):
        raise ImproperlyConfigured(f"{setting}['rate_per_s'] must be a number > 0, got {rate!r}")
    concurrency = conf.get("concurrency")
    if concurrency is not None:
        _positive_int(concurrency, f"{setting}['concurrency']")
    share = conf.get("routine_min_share", 0.1)
    if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 <= share < 1:
        raise ImproperlyConfigured(f"{setting}['routine_min_share'] must be a number in [0, 1), got {share!r}")
    partition_by = conf.get("partition_by")
    if partition_by is not None and (not isinstance(partition_by, str) or not partition_by):
        raise ImproperlyConfigured(f"{setting}['partition_by'] must be a payload field name, got {partition_by!r}")
    partition_limits = {key: conf.get(key) for key in PARTITION_LIMITS}
    if partition_by is None and any(value is not None for value in partition_limits.values()):
        raise ImproperlyConfigured(f"{setting} sets partition limits without 'partition_by'")
    partition_rate = partition_limits["partition_rate_per_s"]
    if partition_rate is not None and (
        isinstance(partition_rate, bool) or not isinstance(partition_rate, (int, float)) or partition_rate <= 0
    ):
        raise ImproperlyConfigured(f"{setting}['partition_rate_per_s'] must be a number > 0, got {partition_rate!r}")
    for key in ("partition_burst", "partition_concurrency"):
        if partition_limits[key] is not None:
            _positive_int(partition_limits[key], f"{setting}['{key}']")
    return GateConfig(
        rate_per_s=float(rate) if rate is not None else None,
        burst=_positive_int(conf.get("burst", 1), f"{setting}['burst']"),
        concurrency=concurrency,
        hold_ms=_positive_int(conf.get("hold_ms", 200), f"{setting}['hold_ms']", minimum=0),
        routine_min_share=float(share),
        partition_by=partition_by,
        max_wait_ms=_positive_int(conf.get("max_wait_ms", 100), f"{setting}['max_wait_ms']"),
        partition_rate_per_s=float(partition_rate) if partition_rate is not None else None,
        partition_burst=partition_limits["partition_burst"],
        partition_concurrency=partition_limits["partition_concurrency"],
    )


def _kinds(raw, channels):
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
            mandatory=_flag(conf.get("mandatory", False), f"{setting}['mandatory']"),
            throttle=_throttle(conf.get("throttle"), klass, setting),
            expires_after_s=None if expires is None else _positive_int(expires, f"{setting}['expires_after_s']"),
            digest_group=_digest_group(conf.get("digest_group", "user"), setting),
            url=_url_template(conf.get("url", ""), setting),
            escalate=conf_inbox.escalate(conf.get("escalate"), f"{setting}['escalate']", names, channels),
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
}

DIGEST_GROUPS = ("user", "kind", "entity")
# The fields a kind's url template may name: {entity_id}, {kind}, or a top-level payload field.
URL_FIELD = re.compile(r"\{([^{}]*)\}")


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


# The fold store's default bound: ten times what the bulk queues hold, in keys, and a KiB a key in payload
# bytes (2048 + 2048 capacities: 40,960 keys, 40 MiB). Past half of it new folds coarsen (user|kind), past
# 80% they fold per user; only a full store refuses (digest/lua/admit_event.lua).
FOLD_KEYS_PER_QUEUED_MESSAGE = 10
FOLD_BYTES_PER_KEY = 1024


def _digest(raw, queues):
    conf = {**DEFAULT_DIGEST, **_mapping(raw, "SLUICE_DIGEST")}
    extra = set(conf) - {"flush_interval_s", "max_keys", "max_fold_keys", "max_fold_bytes", "redis_url", "max_items"}
    if extra:
        raise ImproperlyConfigured(f"SLUICE_DIGEST has unknown keys {sorted(extra)}")
    bulk = queues["routine"].capacity + queues["background"].capacity
    max_fold_keys = _positive_int(
        conf.get("max_fold_keys", FOLD_KEYS_PER_QUEUED_MESSAGE * bulk), "SLUICE_DIGEST['max_fold_keys']"
    )
    return {
        "flush_interval_s": _positive_int(conf["flush_interval_s"], "SLUICE_DIGEST['flush_interval_s']"),
        "max_keys": _positive_int(conf["max_keys"], "SLUICE_DIGEST['max_keys']"),
        "max_items": _max_items(conf["max_items"]),
        "max_fold_keys": max_fold_keys,
        "max_fold_bytes": _positive_int(
            conf.get("max_fold_bytes", FOLD_BYTES_PER_KEY * max_fold_keys), "SLUICE_DIGEST['max_fold_bytes']"
        ),
        # The fold store's own Redis; "" keeps each folding class's folds on its class's Redis, where admission
        # decides in one round trip (a store elsewhere costs a second one for each event it folds).
        "redis_url": _redis_url(conf["redis_url"], "SLUICE_DIGEST['redis_url']") if conf.get("redis_url") else "",
    }


def _max_items(value):
    items = _positive_int(value, "SLUICE_DIGEST['max_items']")
    if items > MAX_DIGEST_ITEMS:
        raise ImproperlyConfigured(f"SLUICE_DIGEST['max_items'] must be at most {MAX_DIGEST_ITEMS}, got {value!r}")
    return items


@lru_cache(maxsize=1)
def sluice_settings():
    """Return the validated settings; raise ImproperlyConfigured naming the bad setting."""
    channels = _channels(getattr(settings, "SLUICE_CHANNELS", {}))
    raw_queues = getattr(settings, "SLUICE_QUEUES", {})
    default_url = _default_redis_url(raw_queues)
    queues = _queues(raw_queues, default_url)
    return SluiceSettings(
        redis_url=default_url,
        queues=queues,
        kinds=_kinds(getattr(settings, "SLUICE_KINDS", {}), channels),
        channels=channels,
        max_payload_bytes=_positive_int(
            getattr(settings, "SLUICE_MAX_PAYLOAD_BYTES", 16 * 1024), "SLUICE_MAX_PAYLOAD_BYTES"
        ),
        max_entity_id_length=_positive_int(
            getattr(settings, "SLUICE_MAX_ENTITY_ID_LENGTH", 200), "SLUICE_MAX_ENTITY_ID_LENGTH"
        ),
        digest=_digest(getattr(settings, "SLUICE_DIGEST", {}), queues),
        gate_enabled=_flag(getattr(settings, "SLUICE_GATE_ENABLED", True), "SLUICE_GATE_ENABLED"),
        dead_letters_max=_positive_int(getattr(settings, "SLUICE_DEAD_LETTERS_MAX", 10_000), "SLUICE_DEAD_LETTERS_MAX"),
        delivery_retention_days=_positive_int(
            getattr(settings, "SLUICE_DELIVERY_RETENTION_DAYS", 30), "SLUICE_DELIVERY_RETENTION_DAYS"
        ),
        tracking_max_events=_positive_int(
            getattr(settings, "SLUICE_TRACKING_MAX_EVENTS", 500), "SLUICE_TRACKING_MAX_EVENTS"
        ),
        inbox=conf_inbox.inbox(getattr(settings, "SLUICE_INBOX", {})),
    )


# What Sluice's Celery app decides for itself (pipeline/celery.py); SLUICE_CELERY may not change it.
OWNED_CELERY_SETTINGS = (
    "broker_url",
    "broker_transport",
    # TLS comes from SLUICE_REDIS_URL's ssl_* options, so the broker and the store check the same certificate.
    "broker_use_ssl",
    "broker_read_url",
    "broker_write_url",
    "worker_disable_prefetch",
    "worker_prefetch_multiplier",
    "task_create_missing_queues",
    "beat_scheduler",
    "task_queues",
    "task_routes",
    "task_default_queue",
    # Celery's own retry of a task whose worker was lost publishes without Sluice's builder: no redacted repr,
    # no ceiling. A lost critical child's message is requeued instead (reject_on_worker_lost).
    "task_retry_on_worker_lost",
)


def celery_overrides():
    """SLUICE_CELERY: Celery settings (lowercase names) for Sluice's own Celery app, checked."""
    raw = _mapping(getattr(settings, "SLUICE_CELERY", {}), "SLUICE_CELERY")
    for key in raw:
        if not isinstance(key, str) or key != key.lower():
            raise ImproperlyConfigured(f"SLUICE_CELERY takes Celery's lowercase setting names, got {key!r}")
        if key in OWNED_CELERY_SETTINGS:
            fix = "set SLUICE_REDIS_URL instead" if key.startswith("broker") else "Sluice sets it itself"
            raise ImproperlyConfigured(f"SLUICE_CELERY[{key!r}] cannot be changed: {fix}")
    if "broker_transport_options" in raw:
        _mapping(raw["broker_transport_options"], "SLUICE_CELERY['broker_transport_options']")
    return dict(raw)


def redis_url():
    """SLUICE_REDIS_URL, checked; there is no default, because a wrong Redis loses events without a sound."""
    url = getattr(settings, "SLUICE_REDIS_URL", None)
    if url is None:
        raise ImproperlyConfigured(
            "SLUICE_REDIS_URL is not set: set it to the Redis that holds Sluice's queues, for example "
            "SLUICE_REDIS_URL = 'redis://127.0.0.1:6379/0' (see docs/integrate.md)"
        )
    return _redis_url(url, "SLUICE_REDIS_URL")


def _default_redis_url(raw_queues):
    """SLUICE_REDIS_URL; when every class names its own Redis it may be left out, and routine's stands in."""
    if getattr(settings, "SLUICE_REDIS_URL", None) is None and isinstance(raw_queues, dict):
        urls = [conf.get("redis_url") if isinstance(conf, dict) else None for conf in map(raw_queues.get, CLASSES)]
        if all(urls):
            return _redis_url(urls[1], "SLUICE_QUEUES['routine']['redis_url']")
    return redis_url()


def _redis_url(url, setting):
    addresses.parse(url, setting)
    return url


@lru_cache(maxsize=64)
def _flag(value, setting):
    if not isinstance(value, bool):
        raise ImproperlyConfigured(f"{setting} must be True or False, got {value!r}")
    return value


@receiver(setting_changed)
def _reset(setting, **kwargs):
    if setting.startswith("SLUICE_"):
        sluice_settings.cache_clear()


DEFAULT_EXPORTER_HOST = "127.0.0.1"


def exporter_host():
    """SLUICE_EXPORTER_HOST: the address `manage.py pipeline_exporter` binds. Loopback by default, because the
    exporter has no login; the chart binds every address and fences the port with a NetworkPolicy."""
    host = getattr(settings, "SLUICE_EXPORTER_HOST", DEFAULT_EXPORTER_HOST)
    if not isinstance(host, str) or not host or any(c.isspace() for c in host):
        raise ImproperlyConfigured(f"SLUICE_EXPORTER_HOST must be an address such as '127.0.0.1', got {host!r}")
    return host
