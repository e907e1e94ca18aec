"""Hook points for worker subprocesses in fault tests (SLUICE_FETCH_TEST_HOOK names one of these)."""

import os
import time
from pathlib import Path


def mark_then_pause(source):
    """Between a fetch and its record: write a line to SLUICE_HOOK_MARK, then pause SLUICE_HOOK_PAUSE_S, so a
    test kills the worker while the message is neither in the queue nor recorded as delivered."""
    with Path(os.environ["SLUICE_HOOK_MARK"]).open("a") as mark:
        mark.write(f"{os.getpid()} {source}\n")
    time.sleep(float(os.environ.get("SLUICE_HOOK_PAUSE_S", "5")))


def crash_on_deliver():
    """Make every delivery raise inside the consumer's event loop: an unrecoverable error for the worker."""
    from kombu.transport.virtual import base

    def deliver(self, message, queue):
        raise RuntimeError("injected: delivery crashed")

    base.Transport._deliver = deliver
