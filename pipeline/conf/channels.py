"""SLUICE_CHANNELS: each delivery channel, its backend or providers, and its gate's limits, validated."""

from dataclasses import dataclass, field

from django.core.exceptions import ImproperlyConfigured

from pipeline.conf import providers as conf_providers
from pipeline.conf.validate import NAME
from pipeline.conf.validate import mapping as _mapping
from pipeline.conf.validate import positive_int as _positive_int


@dataclass(frozen=True)
class GateConfig:
    """A shared channel's limits, enforced across every worker by pipeline.gates.gate."""

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
    # Ordered providers to fail over between (pipeline.gates.breaker); empty for a channel with one ``backend``.
    providers: tuple = ()


def channels(raw):
    """SLUICE_CHANNELS resolved: {name: ChannelConfig}."""
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
