"""The inbox's settings: SLUICE_INBOX and a kind's ``url`` and ``escalate`` options, validated for pipeline.conf."""

from dataclasses import dataclass

from django.core.exceptions import ImproperlyConfigured

from pipeline.conf.validate import mapping, positive_int

# max_payload_bytes: what an item keeps of its newest event's payload, as JSON (notifications.inbox.bounds); a
# caller's payload may be up to SLUICE_MAX_PAYLOAD_BYTES, and a user keeps up to max_items rows.
DEFAULT_INBOX = {"max_items": 500, "retention_days": 90, "max_payload_bytes": 2048}
#: The inbox channel's backend: a kind escalates only from an inbox, so it must have a channel with it.
INBOX_BACKEND = "notifications.inbox.channel.InboxChannel"


@dataclass(frozen=True)
class InboxConfig:
    """SLUICE_INBOX, resolved: the most items a user keeps, how many days an item untouched since is kept, and the
    most bytes of payload an item keeps."""

    max_items: int
    retention_days: int
    max_payload_bytes: int


def inbox(raw):
    """SLUICE_INBOX resolved: an InboxConfig; ImproperlyConfigured names a bad key."""
    conf = {**DEFAULT_INBOX, **mapping(raw, "SLUICE_INBOX")}
    extra = set(conf) - set(DEFAULT_INBOX)
    if extra:
        raise ImproperlyConfigured(f"SLUICE_INBOX has unknown keys {sorted(extra)}")
    return InboxConfig(**{name: positive_int(conf[name], f"SLUICE_INBOX['{name}']") for name in DEFAULT_INBOX})


def escalate(raw, setting, kind_channels, channels):
    """A kind's ``escalate``: ``{"after_s": 900, "channels": ["email"]}`` -> (after_s, channels), or None.

    The kind must send to an inbox (a channel whose backend is the inbox's), and the escalation's channels must be
    other channels of SLUICE_CHANNELS: an unread item is sent there once."""
    if raw is None:
        return None
    raw = mapping(raw, setting)
    if set(raw) != {"after_s", "channels"}:
        raise ImproperlyConfigured(f"{setting} takes exactly 'after_s' and 'channels', got {sorted(raw)}")
    after_s = positive_int(raw["after_s"], f"{setting}['after_s']")
    names = raw["channels"]
    if not isinstance(names, (list, tuple)) or not names or not all(isinstance(n, str) for n in names):
        raise ImproperlyConfigured(f"{setting}['channels'] must be a non-empty list of channel names, got {names!r}")
    missing = [name for name in names if name not in channels]
    if missing:
        raise ImproperlyConfigured(f"{setting}['channels'] names channels not in SLUICE_CHANNELS: {missing}")
    inboxes = [name for name in kind_channels if channels[name].backend == INBOX_BACKEND]
    if not inboxes:
        raise ImproperlyConfigured(
            f"{setting} needs an inbox channel among the kind's channels (backend {INBOX_BACKEND})"
        )
    looping = [name for name in names if channels[name].backend == INBOX_BACKEND]
    if looping:
        raise ImproperlyConfigured(f"{setting}['channels'] cannot name an inbox channel: {looping}")
    return after_s, tuple(names)
