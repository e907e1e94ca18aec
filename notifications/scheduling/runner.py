"""The mover's home: a thread a class in Sluice's beat, started as beat starts (pipeline.beat.beat_ready).

Each thread looks at its class's next staged send a few times a second, and when one is due (or the staging window
must move on) takes a step under the class's lease (pipeline.housekeeping): so however many beats run, one mover
publishes a class at a time, and a beat that dies holds its class for the lease's few seconds at most. Beat is the
process a deployment already runs for Sluice's periodic tasks; nothing new to deploy.
"""

import logging
import threading
import time

from django.db import DatabaseError, close_old_connections, connection
from redis.exceptions import RedisError

from pipeline import housekeeping
from pipeline.admission import schedule as staging
from pipeline.conf import CLASSES
from pipeline.connections import route

from . import mover, stager

logger = logging.getLogger("sluice.scheduling")

TASK = "sluice.scheduling.mover"
# How often a thread looks for a due send: the most a send waits for its mover, on top of its step.
TICK_S = 0.1
# A step's budget and lease: short, so that a beat that died leaves its class to another within seconds.
STEP_BUDGET_S = 0.5
LEASE_S = 5
# How often the staging window is looked at, when nothing is due.
STAGE_EVERY_S = 5

_started = threading.Event()


def start(**kwargs):
    """Start one mover thread a class (once a process): beat_ready's receiver."""
    if _started.is_set():
        return
    _started.set()
    for klass in CLASSES:
        threading.Thread(target=run, args=(klass,), name=f"sluice-mover-{klass}", daemon=True).start()
    logger.info("scheduled sends: a mover for each class (%s) runs in this beat", ", ".join(CLASSES))


def run(klass, stop=None, tick_s=TICK_S):
    """A class's mover loop, until ``stop`` (a threading.Event) is set."""
    try:
        _loop(klass, stop, tick_s)
    finally:
        # The thread's own database connection: closed with the thread, not left to the garbage collector (a
        # PostgreSQL session left open holds its database).
        connection.close()


def _loop(klass, stop, tick_s):
    staged_at = 0.0
    while stop is None or not stop.is_set():
        try:
            close_old_connections()
            now = time.time()
            due = staging.next_due(klass)
            if (due is not None and due <= now) or now - staged_at >= STAGE_EVERY_S:
                step_once(klass, now)
                staged_at = now
            due = staging.next_due(klass)
        except (RedisError, DatabaseError) as exc:
            # Redis or the database away: the sends wait where they are (nothing is taken without a lease), and the
            # loop tries again in a second.
            logger.warning("scheduled sends (%s): the mover waits, %s: %s", klass, type(exc).__name__, exc)
            due = None
            time.sleep(1)
        time.sleep(max(0.005, min(tick_s, (due - time.time()) if due else tick_s)))


def step_once(klass, now=None):
    """One step of ``klass``'s mover under its lease: publish what is due, then move the staging window on; return
    what the mover did, or None when another mover holds the class."""
    with housekeeping.step(TASK, klass, route(klass).client, budget_s=STEP_BUDGET_S, lease_s=LEASE_S) as step:
        if step is None:
            return None
        done = mover.drain(klass, step, now)
        if not step.over():
            done["staged"] = stager.stage_window(klass, now, step)
    return done
