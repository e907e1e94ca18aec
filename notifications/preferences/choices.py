"""Users' preferences: the API a host's settings page calls, which choice wins, and their mirror in Redis.

Admission never queries the database: each user's choices are mirrored into one Redis hash (pipeline.redis.keys.
preferences), which admission (pipeline/admission/lua/admit_event.lua) reads in the same round trip. A save writes the
user's hash once its transaction commits; every hour a flush rebuilds the whole mirror from the database, which heals
drift and moves the mirrored quiet hours and cadence ticks forward.
"""

import logging
import time
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import time as time_of_day

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from notifications.preferences.schedule import DAY, daily_ticks, hourly_ticks, quiet_intervals
from pipeline.admission import wire
from pipeline.conf import sluice_settings
from pipeline.connections import get_redis, users_by_redis
from pipeline.redis import keys

from .models import NotificationSettings, Preference

logger = logging.getLogger("sluice.preferences")

# How far ahead quiet hours and cadence ticks are mirrored: a week and a day, refreshed every hour.
HORIZON_S = 8 * DAY
REBUILD_EVERY_S = 3600
BATCH = 500


# Which choice wins


def candidates(kind, channel):
    """The (kind, category, channel) scopes that can decide ``kind`` on ``channel``, most specific first."""
    yield kind.name, "", channel
    yield kind.name, "", ""
    if kind.category:
        yield "", kind.category, channel
        yield "", kind.category, ""
    yield "", "", channel
    yield "", "", ""


def resolve(kind, rows):
    """(instant channels, digest channels, strict) of ``kind`` for a user whose choices are ``rows``
    ({(kind, category, channel): mode}); strict when the user chose "instant" themselves."""
    instant, digest, strict = [], [], False
    for channel in kind.channels:
        mode, explicit = kind.default_mode, False
        if not kind.mandatory:
            for scope in candidates(kind, channel):
                if scope in rows:
                    mode, explicit = rows[scope], True
                    break
        if kind.klass == "critical" and mode == "digest":
            mode = "instant"  # critical never folds; a row for every kind or a category cannot change that
        if mode == "instant":
            instant.append(channel)
            strict = strict or explicit
        elif mode == "digest":
            digest.append(channel)
    return tuple(instant), tuple(digest), strict


def escalation_channels(kind):
    """A kind's escalation channels outside its own channels: those the user cannot choose for the kind itself."""
    return tuple(c for c in kind.escalate[1] if c not in kind.channels) if kind.escalate else ()


def resolve_escalation(kind, rows, instant, digest):
    """(instant, digest) of ``kind``'s escalation channels outside its own (escalation_channels), for a user whose
    choices are ``rows`` and who takes the kind ``instant`` and ``digest`` (resolve()): each channel as the most
    specific of their rows for it decides (the kind on every channel, its category, every kind), else as the kind
    goes for them (in their digest when they take the kind only as a digest, else at once). Neither list: off."""
    kind_mode = "digest" if digest and not instant else "instant"
    now, later = [], []
    for channel in escalation_channels(kind):
        mode = kind_mode
        if not kind.mandatory:
            mode = next((rows[scope] for scope in candidates(kind, channel) if scope in rows), kind_mode)
        if kind.klass == "critical" and mode == "digest":
            mode = "instant"
        if mode == "instant":
            now.append(channel)
        elif mode == "digest":
            later.append(channel)
    return tuple(now), tuple(later)


def _seconds(value):
    return value.hour * 3600 + value.minute * 60 + value.second


def mirror_fields(rows, settings_row, now):
    """The fields of one user's Redis hash: k:<kind> plans (only when the user chose something), q quiet
    intervals and c cadence ticks (UTC seconds, over the next HORIZON_S)."""
    fields = {}
    if rows:
        for kind in sluice_settings().kinds.values():
            instant, digest, strict = resolve(kind, rows)
            fields[wire.plan_field(kind.name)] = wire.encode_plan(instant, digest, strict)
            if escalation_channels(kind):
                plan = wire.encode_plan(*resolve_escalation(kind, rows, instant, digest), False)
                fields[wire.escalation_plan_field(kind.name)] = plan
    if settings_row is not None:
        zone, since, until = settings_row.timezone, now - 3600, now + HORIZON_S
        if settings_row.quiet_start is not None and settings_row.quiet_end is not None:
            windows = quiet_intervals(
                zone, _seconds(settings_row.quiet_start), _seconds(settings_row.quiet_end), since, until
            )
            fields[wire.QUIET_FIELD] = ",".join(f"{start}-{end}" for start, end in windows)
        if settings_row.cadence == "hourly":
            fields[wire.CADENCE_FIELD] = ",".join(str(t) for t in hourly_ticks(zone, now, until))
        elif settings_row.cadence == "daily":
            fields[wire.CADENCE_FIELD] = ",".join(
                str(t) for t in daily_ticks(zone, _seconds(settings_row.digest_at), now, until)
            )
    return {name: value for name, value in fields.items() if value}


def write_mirror(user_ids, client=None, now=None):
    """Write these users' hashes from the database (and drop the hash of a user with no choices left), on
    ``client``'s Redis or on every class's Redis: admission reads them where it runs, on the class's Redis."""
    now = time.time() if now is None else now
    user_ids = list(user_ids)
    rows, found = {}, {}
    for row in Preference.objects.filter(user_id__in=user_ids).values("user_id", "kind", "category", "channel", "mode"):
        rows.setdefault(row["user_id"], {})[(row["kind"], row["category"], row["channel"])] = row["mode"]
    for settings_row in NotificationSettings.objects.filter(user_id__in=user_ids):
        found[settings_row.user_id] = settings_row
    fields = {user_id: mirror_fields(rows.get(user_id, {}), found.get(user_id), now) for user_id in user_ids}
    for target, users in users_by_redis(user_ids, client):
        pipe = target.pipeline(transaction=True)
        for user_id in users:
            key = keys.preferences(user_id)
            pipe.delete(key)
            if fields[user_id]:
                pipe.hset(key, mapping=fields[user_id])
                pipe.expire(key, HORIZON_S + DAY)  # a user deleted outside Django's signals leaves nothing for long
        pipe.execute()


def rebuild_mirror(**kwargs):
    """At a flush (digest.signals.flush_started), at most once an hour across every flusher: rebuild it all."""
    try:
        return _rebuild_mirror()
    except (RedisConnectionError, RedisTimeoutError) as exc:
        # It heals drift and moves windows forward; a Redis that is away (a failover) just delays it to a later
        # flush, and the flush itself goes on.
        logger.warning("preferences mirror not rebuilt, Redis unavailable: %s", exc)
        return 0


def _rebuild_mirror():
    client = get_redis()
    if not client.set(keys.preferences_rebuilt(), time.time(), nx=True, ex=REBUILD_EVERY_S):
        return 0
    # (This module's own set() is the API's; the builtin is not used here.)
    user_ids = {
        *Preference.objects.values_list("user_id", flat=True).distinct(),
        *NotificationSettings.objects.values_list("user_id", flat=True),
    }
    ordered = sorted(user_ids, key=str)
    for start in range(0, len(ordered), BATCH):
        write_mirror(ordered[start : start + BATCH])
    return len(ordered)


def mirror_on_commit(user_id):
    """Write one user's hash once the surrounding transaction commits (the next event sees the change)."""
    transaction.on_commit(lambda: write_mirror([user_id]))


# The user whose rows are being replaced as a whole (replacing()): their saves and deletes write no mirror each.
_replacing = ContextVar("sluice_preferences_replacing", default=None)


@contextmanager
def replacing(user_id):
    """Within a transaction: the user's rows may change any number of times, and the user's hash is written once, at
    the end, from what the transaction holds then. A Redis that cannot be written raises, so that the transaction
    rolls back: nothing is saved that admission would not see."""
    token = _replacing.set(user_id)
    try:
        yield
    finally:
        _replacing.reset(token)
    write_mirror([user_id])


@receiver([post_save, post_delete], sender=Preference)
@receiver([post_save, post_delete], sender=NotificationSettings)
def _changed(instance, **kwargs):
    if _replacing.get() == instance.user_id:
        return
    mirror_on_commit(instance.user_id)


# The API of a host's settings page


def _user_id(user):
    return user.pk if isinstance(user, get_user_model()) else user


def get(user):
    """A user's choices, quiet hours, cadence, and what each kind does for them on each channel."""
    user_id = _user_id(user)
    rows = {(row.kind, row.category, row.channel): row.mode for row in Preference.objects.filter(user_id=user_id)}
    settings_row = NotificationSettings.objects.filter(user_id=user_id).first()
    effective = {}
    for kind in sluice_settings().kinds.values():
        instant, digest, _strict = resolve(kind, rows)
        off = [c for c in kind.channels if c not in instant and c not in digest]
        effective[kind.name] = {"instant": list(instant), "digest": list(digest), "off": off}
        if kind.escalate:
            effective[kind.name]["escalation"] = _escalation_effective(kind, rows, instant, digest)
    return {
        "preferences": [
            {"kind": k, "category": cat, "channel": ch, "mode": mode} for (k, cat, ch), mode in sorted(rows.items())
        ],
        "timezone": settings_row.timezone if settings_row else "UTC",
        "quiet_hours": (
            {"start": settings_row.quiet_start.isoformat(), "end": settings_row.quiet_end.isoformat()}
            if settings_row and settings_row.quiet_start is not None
            else None
        ),
        "cadence": settings_row.cadence if settings_row else "immediate",
        "digest_at": settings_row.digest_at.isoformat() if settings_row and settings_row.digest_at else None,
        "effective": effective,
    }


def _escalation_effective(kind, rows, instant, digest):
    """Where an unread item of ``kind`` escalates for this user: each escalation channel instant, digest or off, as
    admission narrows the user's plan to them (pipeline/admission/lua/admit_event.lua)."""
    outside = escalation_channels(kind)
    extra_now, extra_later = resolve_escalation(kind, rows, instant, digest)
    shown = {"instant": [], "digest": [], "off": []}
    for channel in kind.escalate[1]:
        if channel in outside:
            mode = "instant" if channel in extra_now else "digest" if channel in extra_later else "off"
        else:
            mode = "instant" if channel in instant else "digest" if channel in digest else "off"
        shown[mode].append(channel)
    return shown


def set(user, *, mode, kind="", category="", channel=""):
    """Choose ``mode`` (instant, digest, off; None to forget the choice) for a kind, a category or every kind,
    on a channel or every channel. Raises ValidationError naming the field."""
    user_id = _user_id(user)
    scope = {"kind": kind or "", "category": category or "", "channel": channel or ""}
    if mode is None:
        Preference.objects.filter(user_id=user_id, **scope).delete()
        return None
    row = Preference.objects.filter(user_id=user_id, **scope).first() or Preference(user_id=user_id, **scope)
    row.mode = mode
    row.full_clean(validate_unique=False)
    row.save()
    return row


def _settings(user_id):
    return NotificationSettings.objects.filter(user_id=user_id).first() or NotificationSettings(user_id=user_id)


def set_quiet_hours(user, tz, start, end):
    """Quiet hours from ``start`` to ``end`` (times of day, or "HH:MM"; end before start crosses midnight) in the
    IANA time zone ``tz``; None and None to clear them. Raises ValidationError naming the field."""
    row = _settings(_user_id(user))
    row.timezone = tz
    row.quiet_start, row.quiet_end = parse_time(start, "quiet_start"), parse_time(end, "quiet_end")
    row.full_clean()
    row.save()
    return row


def set_cadence(user, cadence, at=None, tz=None):
    """The digest cadence: "immediate", "hourly", or "daily" at ``at`` (a time of day, or "HH:MM") in the user's
    time zone (``tz`` to change it). Raises ValidationError naming the field."""
    row = _settings(_user_id(user))
    if tz is not None:
        row.timezone = tz
    row.cadence, row.digest_at = cadence, parse_time(at, "digest_at")
    row.full_clean()
    row.save()
    return row


def parse_time(value, field):
    """A time of day from "HH:MM" (or a time), in the user's time zone; ValidationError naming ``field`` for
    anything else, an offset included ("22:00+05:00": the user's time zone says where the time is)."""
    if value is not None and not isinstance(value, time_of_day):
        try:
            value = time_of_day.fromisoformat(value)
        except (TypeError, ValueError):
            raise ValidationError({field: f"{value!r} is not a time of day (HH:MM)"}) from None
    if value is not None and value.tzinfo is not None:
        raise ValidationError({field: f"{value.isoformat()!r} has an offset; give HH:MM in the user's time zone"})
    return value
