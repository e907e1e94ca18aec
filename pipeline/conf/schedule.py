"""SLUICE_SCHEDULE: how far ahead a send may be scheduled, what is staged in Redis, the bounds per user, and each
class's send rate and the share of it scheduled sends may reserve, validated for pipeline.conf."""

from dataclasses import dataclass

from django.core.exceptions import ImproperlyConfigured

from pipeline.conf.kinds import CLASSES
from pipeline.conf.validate import mapping, positive_int

DEFAULT_HORIZON_DAYS = 400
# What the mover finds in Redis: the sends due within this much of now; the rest wait in the database, and are staged
# as they come within it. An hour keeps Redis's part small and a Redis restart's re-staging short.
DEFAULT_STAGED_S = 3600
DEFAULT_MAX_PER_USER = 1000
# The incident's pool sent about 55 a second; a class's rate is what its pool drains (manage.py capacity).
DEFAULT_RATE_PER_S = 55.0
DEFAULT_RESERVABLE = 0.8
KEYS = ("horizon_days", "staged_s", "max_per_user", *CLASSES)
CLASS_KEYS = ("rate_per_s", "reservable")


@dataclass(frozen=True)
class ClassSchedule:
    """A class's send rate for scheduling: ``rate_per_s`` its pool drains, of which ``reservable`` is for scheduled
    sends (critical reserves it: ``slots_per_s`` of each second; the rest stays for sends now)."""

    rate_per_s: float
    reservable: float

    @property
    def slots_per_s(self):
        """How many scheduled sends one second of this class may hold."""
        return int(self.rate_per_s * self.reservable)


@dataclass(frozen=True)
class ScheduleConfig:
    """SLUICE_SCHEDULE, resolved."""

    horizon_days: int
    staged_s: int
    max_per_user: int
    classes: dict  # {class: ClassSchedule}

    @property
    def horizon_s(self):
        return self.horizon_days * 86400


def schedule(raw):
    """SLUICE_SCHEDULE resolved: a ScheduleConfig; ImproperlyConfigured names a bad key."""
    raw = mapping(raw, "SLUICE_SCHEDULE")
    extra = set(raw) - set(KEYS)
    if extra:
        raise ImproperlyConfigured(f"SLUICE_SCHEDULE has unknown keys {sorted(extra)}")
    classes = {klass: _class(raw.get(klass, {}), f"SLUICE_SCHEDULE['{klass}']") for klass in CLASSES}
    return ScheduleConfig(
        horizon_days=positive_int(raw.get("horizon_days", DEFAULT_HORIZON_DAYS), "SLUICE_SCHEDULE['horizon_days']"),
        staged_s=positive_int(raw.get("staged_s", DEFAULT_STAGED_S), "SLUICE_SCHEDULE['staged_s']", minimum=60),
        max_per_user=positive_int(raw.get("max_per_user", DEFAULT_MAX_PER_USER), "SLUICE_SCHEDULE['max_per_user']"),
        classes=classes,
    )


def _class(raw, setting):
    raw = mapping(raw, setting)
    extra = set(raw) - set(CLASS_KEYS)
    if extra:
        raise ImproperlyConfigured(f"{setting} has unknown keys {sorted(extra)}")
    rate = raw.get("rate_per_s", DEFAULT_RATE_PER_S)
    if isinstance(rate, bool) or not isinstance(rate, (int, float)) or rate <= 0:
        raise ImproperlyConfigured(f"{setting}['rate_per_s'] must be a number > 0, got {rate!r}")
    share = raw.get("reservable", DEFAULT_RESERVABLE)
    if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 < share <= 1:
        raise ImproperlyConfigured(f"{setting}['reservable'] must be a number in (0, 1], got {share!r}")
    found = ClassSchedule(float(rate), float(share))
    if found.slots_per_s < 1:
        raise ImproperlyConfigured(
            f"{setting}: rate_per_s × reservable is {rate * share:g}, less than one send a second to reserve"
        )
    return found
