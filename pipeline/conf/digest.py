"""SLUICE_DIGEST: the flush's interval and size trigger, the digest's length, the fold store's bound and its Redis,
validated for pipeline.conf."""

from dataclasses import dataclass

from django.core.exceptions import ImproperlyConfigured

from pipeline.conf.validate import mapping, positive_int
from pipeline.redis import addresses

DEFAULTS = {"flush_interval_s": 60, "max_keys": 200, "max_items": 20}
KEYS = ("flush_interval_s", "max_keys", "max_fold_keys", "max_fold_bytes", "redis_url", "max_items")
# A user's digest lists at most this many groups, whatever SLUICE_DIGEST["max_items"] says: the message's size
# stays bounded (each listed group carries its latest payload).
MAX_DIGEST_ITEMS = 200
# The fold store's default bound: ten times what the bulk queues hold, in keys, and a KiB a key in payload
# bytes (2048 + 2048 capacities: 40,960 keys, 40 MiB). Past half of it new folds coarsen (user|kind), past
# 80% they fold per user; only a full store refuses (pipeline/admission/lua/include/fold.lua).
FOLD_KEYS_PER_QUEUED_MESSAGE = 10
FOLD_BYTES_PER_KEY = 1024


@dataclass(frozen=True)
class DigestConfig:
    """SLUICE_DIGEST, resolved."""

    # Beat flushes every this many seconds; a size-triggered flush starts once max_keys fold keys are due.
    flush_interval_s: int
    max_keys: int
    # A user's digest lists at most this many groups (at most MAX_DIGEST_ITEMS).
    max_items: int
    # The fold store's bound, in keys and in bytes of payload.
    max_fold_keys: int
    max_fold_bytes: int
    # The fold store's own Redis; "" keeps each folding class's folds on its class's Redis, where admission decides
    # in one round trip (a store elsewhere costs a second one for each event it folds).
    redis_url: str = ""


def digest(raw, queues):
    """SLUICE_DIGEST resolved against the classes' ``queues`` (the fold store's default bound follows their
    capacities): a DigestConfig; ImproperlyConfigured names a bad key."""
    conf = {**DEFAULTS, **mapping(raw, "SLUICE_DIGEST")}
    extra = set(conf) - set(KEYS)
    if extra:
        raise ImproperlyConfigured(f"SLUICE_DIGEST has unknown keys {sorted(extra)}")
    bulk = queues["routine"].capacity + queues["background"].capacity
    max_fold_keys = positive_int(
        conf.get("max_fold_keys", FOLD_KEYS_PER_QUEUED_MESSAGE * bulk), "SLUICE_DIGEST['max_fold_keys']"
    )
    url = conf.get("redis_url") or ""
    if url and addresses.parse(url, "SLUICE_DIGEST['redis_url']").cluster:
        raise ImproperlyConfigured(
            "SLUICE_DIGEST['redis_url'] must name one Redis, not a Redis Cluster: the digest's store is one keyspace "
            "(a flush reads every user's folds together)"
        )
    clustered = [klass for klass in ("routine", "background") if queues[klass].clustered]
    if clustered and not url:
        raise ImproperlyConfigured(
            f"SLUICE_QUEUES[{clustered[0]!r}] is on a Redis Cluster, so its folds need a Redis of their own: set "
            "SLUICE_DIGEST['redis_url'] to one Redis (not a cluster) for the digest's store (docs/scaling.md)"
        )
    return DigestConfig(
        flush_interval_s=positive_int(conf["flush_interval_s"], "SLUICE_DIGEST['flush_interval_s']"),
        max_keys=positive_int(conf["max_keys"], "SLUICE_DIGEST['max_keys']"),
        max_items=_max_items(conf["max_items"]),
        max_fold_keys=max_fold_keys,
        max_fold_bytes=positive_int(
            conf.get("max_fold_bytes", FOLD_BYTES_PER_KEY * max_fold_keys), "SLUICE_DIGEST['max_fold_bytes']"
        ),
        redis_url=url,
    )


def _max_items(value):
    items = positive_int(value, "SLUICE_DIGEST['max_items']")
    if items > MAX_DIGEST_ITEMS:
        raise ImproperlyConfigured(f"SLUICE_DIGEST['max_items'] must be at most {MAX_DIGEST_ITEMS}, got {value!r}")
    return items
