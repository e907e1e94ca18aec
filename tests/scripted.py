"""A channel backend that fails as a test scripts it, for in-process workers."""

import threading
from collections import defaultdict

from notifications.channels.base import BaseChannel, PermanentSendError, TransientSendError

_lock = threading.Lock()
#: channel -> the outcomes of its next sends, one used per send: "ok", "transient", "permanent", or a callable
#: that runs before the send (it may raise). An empty plan means "ok".
plan = defaultdict(list)
#: (notification id, channel) of every send that went out, in order.
sent = []


class ScriptedChannel(BaseChannel):
    """Follows ``plan[channel]``; records successful sends in ``sent``."""

    def send(self, message):
        with _lock:
            step = plan[self.name].pop(0) if plan[self.name] else "ok"
        if callable(step):
            step(message)
        elif step == "transient":
            raise TransientSendError(f"{self.name} is down for now")
        elif step == "permanent":
            raise PermanentSendError(f"{self.name} refused the recipient")
        with _lock:
            sent.append((message.id, self.name))


def reset():
    with _lock:
        plan.clear()
        sent.clear()
