"""A backend that prints each send, for the demo and for local development."""

import sys
import threading

from .base import BaseChannel

_lock = threading.Lock()


class ConsoleChannel(BaseChannel):
    """Writes one line per send to stdout; never shows the payload."""

    def send(self, message):
        count = f" x{message.count}" if message.count > 1 else ""
        line = f"[{self.name}] {message.klass:<10} {message.kind}{count}: {message.subject}\n"
        # The process's real stdout: a Celery worker swaps sys.stdout for a logger, which adds a prefix.
        out = sys.__stdout__ or sys.stdout
        with _lock:
            out.write(line)
            out.flush()
