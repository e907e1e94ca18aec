"""A backend that records sends in memory, for tests (like Django's locmem email backend)."""

import threading

from .base import BaseChannel

outbox = []
#: One entry per send_many call: the ids of the messages it carried, in order.
bulk_calls = []
_lock = threading.Lock()


class LocmemChannel(BaseChannel):
    """Appends every message to ``notifications.channels.locmem.outbox``; a bulk call also records the ids it
    carried in ``bulk_calls``."""

    def send(self, message):
        with _lock:
            outbox.append(message)

    def send_many(self, messages):
        with _lock:
            bulk_calls.append([message.id for message in messages])
            outbox.extend(messages)
        return [None] * len(messages)


def clear():
    """Empty the outbox."""
    with _lock:
        outbox.clear()
        bulk_calls.clear()


class LocmemEmailChannel(LocmemChannel):
    """A LocmemChannel that renders as the email backends do (``sends_html``): its messages have the email layout's
    text and HTML, and their unsubscribe link."""

    sends_html = True
