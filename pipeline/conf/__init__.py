"""The one resolver for SLUICE_ settings: read, validate, and cache them as plain objects."""

from dataclasses import dataclass, field, replace
from functools import cached_property, lru_cache

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed
from django.dispatch import receiver
from kombu.transport.redis import PRIORITY_STEPS, Channel

from pipeline.conf import activity as conf_activity
from pipeline.conf import channels as conf_channels
from pipeline.conf import digest as conf_digest
from pipeline.conf import inbox as conf_inbox
from pipeline.conf import kinds as conf_kinds
from pipeline.conf import mail as conf_mail
from pipeline.conf import schedule as conf_schedule
from pipeline.conf.kinds import CLASSES
from pipeline.conf.providers import BreakerConfig, ProviderConfig  # noqa: F401 - the resolver's types
from pipeline.conf.validate import flag as _flag
from pipeline.conf.validate import mapping as _mapping
from pipeline.conf.validate import positive_int as _positive_int
from pipeline.redis import addresses, cluster, keys

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
# The send claim (pipeline.sending.claims.CLAIM_TTL_S, 120 s) must outlive the attempt it guards.
MAX_SEND_BUDGET_S = 120
# The most messages one send task of a class handles at once (pipeline.sending.engine): critical one at a
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
    # The most messages one send task takes from the queue and handles together (pipeline.sending.engine).
    batch: int = 1
    # "replicated": admission, a fold and a send's end wait (WAIT, in the same round trip) for this many replicas
    # to confirm within durability_timeout_ms (pipeline.durability); "async" returns once the primary has it.
    durability: str = "async"
    durability_replicas: int = 1
    durability_timeout_ms: int = DEFAULT_DURABILITY_TIMEOUT_MS
    # A class on a Redis Cluster is split into this many partitions (pipeline.redis.cluster); 1 on one Redis.
    partitions: int = 1
    # A partition's hash tag ("" for a whole class): what partition() hands out.
    tag: str = ""

    @property
    def replicated(self):
        """Whether this class's writes are confirmed by replicas before they are acknowledged."""
        return self.durability == "replicated"

    @cached_property
    def clustered(self):
        """Whether this class is spread over a Redis Cluster in partitions."""
        return bool(self.redis_url) and addresses.parse(self.redis_url).cluster

    def partition(self, index):
        """Partition ``index`` of this class as a queue of its own: its queue's name starts with its hash tag, and its
        capacity, ceiling and overflow are its share of the class's (exact per partition, so exact in sum)."""
        tag = cluster.partition_tag(self.name, index, self.partitions)
        return replace(
            self,
            name=tag + self.name,
            capacity=cluster.share(self.capacity, index, self.partitions),
            ceiling=cluster.share(self.ceiling, index, self.partitions),
            overflow=cluster.share(self.overflow, index, self.partitions),
            tag=tag,
        )

    @cached_property
    def every_partition(self):
        """Each partition's QueueConfig, in order (a tuple); this class alone on one Redis."""
        return tuple(self.partition(i) for i in range(self.partitions)) if self.clustered and not self.tag else (self,)

    @cached_property
    def queue_names(self):
        """The Celery queues of this class: its partitions' on a cluster, else its own."""
        return tuple(each.name for each in self.every_partition)

    @cached_property
    def partition_indexes(self):
        """{queue name: its partition's index}: which partition a message's queue is, in one lookup."""
        return {name: index for index, name in enumerate(self.queue_names)}

    @property
    def published_to(self):
        """The queue a Celery publish to this class goes to (a retry, a control task): its first partition's on a
        cluster, so that it lands on one slot as everything else does."""
        return self.queue_names[0]


# A day: longer than any client's retries, short enough that the keys a busy caller leaves stay few.
DEFAULT_IDEMPOTENCY_TTL_S = 86_400


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
    digest: object  # a DigestConfig (pipeline.conf.digest)
    gate_enabled: bool
    # Messages that cannot be sent are kept up to this many (pipeline.broker.deadletters); then the oldest go.
    dead_letters_max: int
    # Delivery status records (sent, delivered, bounced ...) are pruned this many days after their send.
    delivery_retention_days: int = 30
    # The events one request to an ESP's tracking webhook may apply; the rest are counted and dropped.
    tracking_max_events: int = 500
    # SLUICE_INBOX: max_items per user and retention_days (pipeline.conf.inbox).
    inbox: object = field(default_factory=lambda: conf_inbox.inbox({}))  # an InboxConfig
    # How long a caller's idempotency key is remembered with the outcome of its first call.
    idempotency_ttl_s: int = DEFAULT_IDEMPOTENCY_TTL_S
    # SLUICE_SCHEDULE: scheduled sends (pipeline.conf.schedule).
    schedule: object = field(default_factory=lambda: conf_schedule.schedule({}))
    # SLUICE_ACTIVITY: the per-person activity log (pipeline.conf.activity).
    activity: object = field(default_factory=lambda: conf_activity.activity({}))


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
            "partitions",
        }
        if extra:
            raise ImproperlyConfigured(f"{name} has unknown keys {sorted(extra)}")
        queue = conf.get("queue", klass)
        if not isinstance(queue, str) or not queue or queue == "celery":
            raise ImproperlyConfigured(f"{name}['queue'] must be a non-empty name other than 'celery'")
        url = conf.get("redis_url", default_url)
        partitions = _partitions(conf, name, _redis_url(url, f"{name}['redis_url']"), capacity)
        queues[klass] = QueueConfig(
            name=queue,
            capacity=capacity,
            wait_ms=wait_ms,
            ceiling=ceiling,
            overflow=overflow,
            send_budget_s=budget,
            redis_url=_redis_url(url, f"{name}['redis_url']"),
            batch=batch,
            partitions=partitions,
            **_durability(conf, name),
        )
    if len({q.name for q in queues.values()}) != len(CLASSES):
        raise ImproperlyConfigured("SLUICE_QUEUES must give each class its own queue")
    return queues


#: Partitions of a class on a Redis Cluster unless it says: four per primary of a three-primary cluster.
DEFAULT_PARTITIONS = 12
MAX_PARTITIONS = 1024


def _partitions(conf, name, url, capacity):
    """A class's partitions: only on a Redis Cluster, at least one message of room each."""
    clustered = addresses.parse(url).cluster
    if "partitions" in conf and not clustered:
        raise ImproperlyConfigured(f"{name}['partitions'] needs a Redis Cluster: its redis_url is not redis+cluster://")
    if not clustered:
        return 1
    partitions = _positive_int(conf.get("partitions", DEFAULT_PARTITIONS), f"{name}['partitions']")
    if partitions > MAX_PARTITIONS:
        raise ImproperlyConfigured(f"{name}['partitions'] must be at most {MAX_PARTITIONS}, got {partitions}")
    if partitions > capacity:
        raise ImproperlyConfigured(
            f"{name}['partitions'] ({partitions}) must be at most its capacity ({capacity}): each partition holds its "
            "share of it"
        )
    return partitions


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


@lru_cache(maxsize=1)
def sluice_settings():
    """Return the validated settings; raise ImproperlyConfigured naming the bad setting."""
    channels = conf_channels.channels(getattr(settings, "SLUICE_CHANNELS", {}))
    raw_queues = getattr(settings, "SLUICE_QUEUES", {})
    default_url = _default_redis_url(raw_queues)
    queues = _queues(raw_queues, default_url)
    return SluiceSettings(
        redis_url=default_url,
        queues=queues,
        kinds=conf_kinds.kinds(getattr(settings, "SLUICE_KINDS", {}), channels),
        channels=channels,
        max_payload_bytes=_positive_int(
            getattr(settings, "SLUICE_MAX_PAYLOAD_BYTES", 16 * 1024), "SLUICE_MAX_PAYLOAD_BYTES"
        ),
        max_entity_id_length=_positive_int(
            getattr(settings, "SLUICE_MAX_ENTITY_ID_LENGTH", 200), "SLUICE_MAX_ENTITY_ID_LENGTH"
        ),
        digest=conf_digest.digest(getattr(settings, "SLUICE_DIGEST", {}), queues),
        gate_enabled=_flag(getattr(settings, "SLUICE_GATE_ENABLED", True), "SLUICE_GATE_ENABLED"),
        dead_letters_max=_positive_int(getattr(settings, "SLUICE_DEAD_LETTERS_MAX", 10_000), "SLUICE_DEAD_LETTERS_MAX"),
        delivery_retention_days=_positive_int(
            getattr(settings, "SLUICE_DELIVERY_RETENTION_DAYS", 30), "SLUICE_DELIVERY_RETENTION_DAYS"
        ),
        tracking_max_events=_positive_int(
            getattr(settings, "SLUICE_TRACKING_MAX_EVENTS", 500), "SLUICE_TRACKING_MAX_EVENTS"
        ),
        inbox=conf_inbox.inbox(getattr(settings, "SLUICE_INBOX", {})),
        idempotency_ttl_s=_positive_int(
            getattr(settings, "SLUICE_IDEMPOTENCY_TTL_S", DEFAULT_IDEMPOTENCY_TTL_S), "SLUICE_IDEMPOTENCY_TTL_S"
        ),
        schedule=conf_schedule.schedule(getattr(settings, "SLUICE_SCHEDULE", {})),
        activity=conf_activity.activity(getattr(settings, "SLUICE_ACTIVITY", {})),
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
    if _redis_url(url, "SLUICE_REDIS_URL") and addresses.parse(url).cluster:
        raise ImproperlyConfigured(
            "SLUICE_REDIS_URL must name one Redis, not a Redis Cluster: it holds what every class shares; put a class "
            "on a cluster with SLUICE_QUEUES[class]['redis_url'] (docs/scaling.md)"
        )
    return url


def _default_redis_url(raw_queues):
    """SLUICE_REDIS_URL; when every class names its own Redis it may be left out, and routine's stands in (unless it
    is a Redis Cluster: then critical's or background's, if one is a single Redis)."""
    if getattr(settings, "SLUICE_REDIS_URL", None) is None and isinstance(raw_queues, dict):
        urls = [conf.get("redis_url") if isinstance(conf, dict) else None for conf in map(raw_queues.get, CLASSES)]
        if all(urls):
            for klass in ("routine", "critical", "background"):
                url = _redis_url(urls[CLASSES.index(klass)], f"SLUICE_QUEUES[{klass!r}]['redis_url']")
                if not addresses.parse(url).cluster:
                    return url
    return redis_url()


def _redis_url(url, setting):
    addresses.parse(url, setting)
    return url


#: Sluice's own transport options (its Celery app's broker_transport_options), under SLUICE_CELERY's.
DEFAULT_TRANSPORT_OPTIONS = {
    # Longer than the longest send plus its retries: an unacked message older than this is handed to
    # another worker, so a shorter value would send twice.
    "visibility_timeout": 300,
    "queue_order_strategy": "round_robin",
    # A worker that has not said it is alive for this long is dead: the reaper puts its fetched and
    # unacked messages back at once (pipeline/broker/transport.py), instead of after the visibility timeout.
    "fetch_dead_after_s": 60,
}


@lru_cache(maxsize=1)
def transport_options():
    """The transport options of Sluice's Celery app, resolved once per settings: DEFAULT_TRANSPORT_OPTIONS under
    SLUICE_CELERY["broker_transport_options"] (a URL's own, such as a Sentinel master's name, go on top of them in
    pipeline.celery.broker_settings). What the transport, the batch fetch and the "sent" marks' lifetime read."""
    return {**DEFAULT_TRANSPORT_OPTIONS, **celery_overrides().get("broker_transport_options", {})}


@lru_cache(maxsize=16)
def queue_lists(queue):
    """A queue's list and its priority sub-lists, as Sluice's transport names them: its own transport options, never
    the host's CELERY_ ones. A tuple."""
    options = transport_options()
    steps = options.get("priority_steps", PRIORITY_STEPS)
    return tuple(keys.priority_lists(queue, steps, options.get("sep", Channel.sep)))


@receiver(setting_changed)
def _reset(setting, **kwargs):
    if setting.startswith("SLUICE_"):
        sluice_settings.cache_clear()
        transport_options.cache_clear()
        queue_lists.cache_clear()
        conf_mail.mail_settings.cache_clear()


DEFAULT_EXPORTER_HOST = "127.0.0.1"


def exporter_host():
    """SLUICE_EXPORTER_HOST: the address `manage.py pipeline_exporter` binds. Loopback by default, because the
    exporter has no login; the chart binds every address and fences the port with a NetworkPolicy."""
    host = getattr(settings, "SLUICE_EXPORTER_HOST", DEFAULT_EXPORTER_HOST)
    if not isinstance(host, str) or not host or any(c.isspace() for c in host):
        raise ImproperlyConfigured(f"SLUICE_EXPORTER_HOST must be an address such as '127.0.0.1', got {host!r}")
    return host
