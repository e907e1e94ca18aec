"""A backend that records sends in memory, for tests (like Django's locmem email backend)."""

import threading

from .base import BaseChannel

outbox = []
_lock = threading.Lock()


class LocmemChannel(BaseChannel):
    """Appends every message to ``notifications.channels.locmem.outbox``."""

    def send(self, message):
        with _lock:
            outbox.append(message)


def clear():
    """Empty the outbox."""
    with _lock:
        outbox.clear()
