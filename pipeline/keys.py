"""Every Redis key name Sluice uses, in one place."""

PREFIX = "sluice"


def sent(notification_id, channel):
    """Send state of one notification on one channel: "sending" while claimed, then "sent"."""
    return f"{PREFIX}:sent:{notification_id}:{channel}"


def counters():
    """Hash of exact, cluster-wide counters (field names are metric label tuples)."""
    return f"{PREFIX}:counters"
