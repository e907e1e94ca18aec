"""The providers of a channel and their circuit breakers, as SLUICE_CHANNELS[channel]["providers"] and
["breaker"] give them (part of the settings resolver, pipeline.conf)."""

import importlib.util
import re
from dataclasses import dataclass, field

from django.apps import apps
from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

from pipeline.conf.validate import mapping, positive_int


@dataclass(frozen=True)
class BreakerConfig:
    """A provider's circuit breaker (pipeline.gates.breaker): when it opens, how it probes, when it closes."""

    # The sliding window the ratios are measured over, and the fewest calls in it that may open the breaker: enough
    # calls that a provider failing 30% of the time does not reach 50% by chance (20 calls would, 1 time in 20).
    window_s: int = 30
    min_calls: int = 50
    # Open at this share of failed calls, or of calls slower than slow_call_s, within the window.
    open_failure_ratio: float = 0.5
    open_slow_ratio: float = 0.5
    slow_call_s: float = 2.0
    # Also open after this many failed calls in a row (0: never): a provider that went down is left after a
    # second of traffic, not after half a window of diluted ratios. 30% random failure makes 10 in a row a
    # one-in-170,000 event.
    open_consecutive_failures: int = 10
    # Stay open at least this long, so a recovering provider is not hammered back down; each failed round of
    # probes doubles it, up to max_open_s, so a provider that stays down is probed less and less often.
    min_open_s: int = 10
    max_open_s: int = 300
    # Half-open: this many probe calls, and close only if at most this share of them failed or were slow.
    # Lower than the opening ratio on purpose (hysteresis): a provider hovering at one threshold cannot flap.
    half_open_probes: int = 5
    close_failure_ratio: float = 0.2


@dataclass(frozen=True)
class ProviderConfig:
    """One provider of a channel: a dotted-path backend, its options, and its breaker (None: never opens)."""

    name: str
    backend: str
    options: dict = field(default_factory=dict)
    breaker: BreakerConfig | None = None


PROVIDER_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,49}$")
BREAKER_RATIOS = ("open_failure_ratio", "open_slow_ratio", "close_failure_ratio")


def backend_path(backend, setting):
    """``backend`` if it is a dotted path to something importable, else ImproperlyConfigured naming ``setting``.

    Before Django has loaded its apps (Celery reads its configuration first, in `celery -A pipeline beat`), only the
    module is looked up, not run: a backend's module may import models (the inbox's does), which cannot be imported
    yet. The whole path is imported by the sluice.E002 check, which runs once the apps are loaded, and by its first
    send."""
    module, _, name = backend.rpartition(".") if isinstance(backend, str) else ("", "", "")
    if not module or not name:
        raise ImproperlyConfigured(f"{setting} must be a dotted path, got {backend!r}")
    try:
        if apps.ready:
            import_string(backend)
        elif importlib.util.find_spec(module) is None:
            raise ImportError(f"No module named {module!r}")
    except ImportError as exc:
        raise ImproperlyConfigured(f"{setting} cannot be imported: {exc}") from exc
    return backend


def providers(raw, channel_breaker, setting):
    if not isinstance(raw, (list, tuple)) or not raw:
        raise ImproperlyConfigured(f"{setting}['providers'] must be a non-empty list, in order of preference")
    providers, seen = [], set()
    for index, conf in enumerate(raw):
        where = f"{setting}['providers'][{index}]"
        conf = mapping(conf, where)
        name = conf.get("name")
        if not isinstance(name, str) or not PROVIDER_NAME.match(name):
            raise ImproperlyConfigured(f"{where}['name'] must match {PROVIDER_NAME.pattern}, got {name!r}")
        if name in seen:
            raise ImproperlyConfigured(f"{where}['name'] {name!r} is used twice in the channel")
        seen.add(name)
        extra = set(conf) - {"name", "backend", "options", "breaker"}
        if extra:
            raise ImproperlyConfigured(f"{where} has unknown keys {sorted(extra)}")
        breaker = conf.get("breaker", {})
        providers.append(
            ProviderConfig(
                name=name,
                backend=backend_path(conf.get("backend"), f"{where}['backend']"),
                options=dict(mapping(conf.get("options", {}), f"{where}['options']")),
                breaker=None if breaker is None else breaker_config({**channel_breaker, **breaker}, where),
            )
        )
    return tuple(providers)


def breaker_config(raw, setting):
    setting = f"{setting}['breaker']"
    raw = mapping(raw, setting)
    defaults = BreakerConfig()
    extra = set(raw) - set(vars(defaults))
    if extra:
        raise ImproperlyConfigured(f"{setting} has unknown keys {sorted(extra)}")
    conf = {**vars(defaults), **raw}
    for key in ("window_s", "min_calls", "min_open_s", "max_open_s", "half_open_probes"):
        positive_int(conf[key], f"{setting}['{key}']")
    positive_int(conf["open_consecutive_failures"], f"{setting}['open_consecutive_failures']", minimum=0)
    for key in (*BREAKER_RATIOS, "slow_call_s"):
        value = conf[key]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise ImproperlyConfigured(f"{setting}['{key}'] must be a number >= 0, got {value!r}")
        conf[key] = float(value)
    for key in ("open_failure_ratio", "open_slow_ratio"):
        if not 0 < conf[key] <= 1:
            raise ImproperlyConfigured(f"{setting}['{key}'] must be in (0, 1], got {conf[key]!r}")
    if not conf["close_failure_ratio"] < conf["open_failure_ratio"]:
        raise ImproperlyConfigured(
            f"{setting}['close_failure_ratio'] ({conf['close_failure_ratio']}) must be below "
            f"'open_failure_ratio' ({conf['open_failure_ratio']}): different thresholds keep the breaker from flapping"
        )
    if conf["slow_call_s"] <= 0:
        raise ImproperlyConfigured(f"{setting}['slow_call_s'] must be > 0, got {conf['slow_call_s']!r}")
    if conf["max_open_s"] < conf["min_open_s"]:
        raise ImproperlyConfigured(f"{setting}['max_open_s'] must be >= 'min_open_s'")
    return BreakerConfig(**conf)
