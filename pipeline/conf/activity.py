"""The activity log's settings: SLUICE_ACTIVITY, validated for pipeline.conf."""

from dataclasses import dataclass

from django.core.exceptions import ImproperlyConfigured

from pipeline.conf.validate import flag, mapping, positive_int

# buffer_entries: the most entries each class's Redis keeps waiting for the drain (a capped stream: past it the
# oldest undrained ones are trimmed, and counted as dropped); retention_days: how long the host's database keeps them.
DEFAULT_ACTIVITY = {"enabled": True, "buffer_entries": 100_000, "retention_days": 14}


@dataclass(frozen=True)
class ActivityConfig:
    """SLUICE_ACTIVITY, resolved: whether decisions and sends are recorded, each class's buffer bound in Redis, and
    how many days the database keeps an entry."""

    enabled: bool
    buffer_entries: int
    retention_days: int


def activity(raw):
    """SLUICE_ACTIVITY resolved: an ActivityConfig; ImproperlyConfigured names a bad key."""
    conf = {**DEFAULT_ACTIVITY, **mapping(raw, "SLUICE_ACTIVITY")}
    extra = set(conf) - set(DEFAULT_ACTIVITY)
    if extra:
        raise ImproperlyConfigured(f"SLUICE_ACTIVITY has unknown keys {sorted(extra)}")
    return ActivityConfig(
        enabled=flag(conf["enabled"], "SLUICE_ACTIVITY['enabled']"),
        buffer_entries=positive_int(conf["buffer_entries"], "SLUICE_ACTIVITY['buffer_entries']", minimum=100),
        retention_days=positive_int(conf["retention_days"], "SLUICE_ACTIVITY['retention_days']"),
    )
