"""Housekeeping in bounded steps: one step of a task per scope at a time (a lease), each within a time budget.

A periodic or control task (the digest flush, the overflow drain, the inbox escalations, the prunes) runs in a
worker slot that a send could use: a step that ran for seconds was seconds of a slot lost, and on the critical pool
a login code waited behind it. So each step of such a task:

- takes its task's lease in its scope (a class, or a fold store) on that scope's Redis, or does nothing when another
  step holds it (two beat ticks, a size-triggered flush beside beat's, a drainer that stalled);
- stops taking new work once its budget (``STEP_BUDGET_S``) is spent, finishing only the item it is in;
- records when it ran and whether it caught up, which the exporter turns into
  ``sluice_housekeeping_behind_seconds`` (the SluiceHousekeepingBehind alert);
- asks for its next step at the back of its queue when it left work (``again``), unless one waits there already,
  so whatever was queued meanwhile, a critical send included, goes first; beat's next tick is the backstop.

The lease outlives any step by far (``LEASE_S``): a step killed mid-way holds its task back that long at most, and
whatever the step had claimed is taken over by the task's own claims and leases, never lost.
"""

import logging
import time
import uuid
from contextlib import contextmanager

from redis.exceptions import RedisError

from pipeline.connections import script
from pipeline.redis import keys

from .metrics import housekeeping_field

logger = logging.getLogger("sluice.housekeeping")

#: The most a step spends taking new work. A second is a critical send's whole budget of patience several times
#: over, and still long enough that the fixed cost of a step (its lease, a claim) is a small share of it.
STEP_BUDGET_S = 1.0
#: Far past any step's budget: how long a step killed mid-way keeps its task from running.
LEASE_S = 30
#: How long a queued next step keeps others from queueing another one: past any wait in a busy queue, short enough
#: that a lost mark (its step never ran) costs at most this.
QUEUED_TTL_S = 300
RESULTS = ("caught_up", "more", "skipped")


class Step:
    """A running step of a housekeeping task: its budget, and whether it left work (``more``)."""

    def __init__(self, task, scope, budget_s):
        self.task, self.scope = task, scope
        self.deadline = time.monotonic() + budget_s
        self.more = False

    def over(self):
        """Whether the budget is spent: take no new work."""
        return time.monotonic() >= self.deadline


def unbounded():
    """A step without a budget or a lease, never over: for tools and tests that run a task's body to the end, or race
    several of them on purpose (the claims keep them exactly once; the lease only keeps a pool free)."""
    return Step("", "", float("inf"))


@contextmanager
def step(task, scope, client, budget_s=None, lease_s=LEASE_S):
    """Run one step of ``task`` in ``scope`` under its lease on ``client``, within ``budget_s`` (by default
    STEP_BUDGET_S): yield a Step, or None when another step holds the lease. On the way out, record the step (caught
    up, or ``more`` left) and release the lease."""
    lease = keys.housekeeping_lease(task, scope)
    token = uuid.uuid4().hex
    # Whichever step runs now is the queued one: a next step may be asked for again from here on.
    client.delete(keys.housekeeping_queued(task, scope))
    if not client.set(lease, token, nx=True, px=int(lease_s * 1000)):
        _record(client, task, scope, "skipped")
        yield None
        return
    current = Step(task, scope, STEP_BUDGET_S if budget_s is None else budget_s)
    try:
        yield current
        _record(client, task, scope, "more" if current.more else "caught_up")
    finally:
        script("lease_release", on=client)(keys=[lease], args=[token])


def again(task, scope, client, **options):
    """Ask for the next step of ``task`` (a Celery task) in ``scope``: published at the back of its queue with
    ``options`` (apply_async's), unless a next step waits there already. Return whether it published one."""
    queued = keys.housekeeping_queued(task.name, scope)
    if not client.set(queued, 1, nx=True, ex=QUEUED_TTL_S):
        return False
    try:
        task.apply_async(**options)
    except Exception:
        client.delete(queued)  # nothing is queued: beat's next tick may ask
        raise
    return True


def delete_in_batches(rows, step, batch):
    """Delete ``rows`` (a QuerySet) ``batch`` primary keys at a time until none is left or ``step`` is over (then
    ``step.more``); return how many went. At least one batch a step, however small its budget: every step makes
    progress."""
    total = 0
    while pks := list(rows.order_by().values_list("pk", flat=True)[:batch]):
        total += rows.model.objects.filter(pk__in=pks).delete()[0]
        if len(pks) < batch:
            break  # the last of them
        if step.over():
            step.more = True
            break
    return total


def _record(client, task, scope, result):
    state = keys.housekeeping_state()
    try:
        pipe = client.pipeline(transaction=False)
        pipe.hincrby(keys.counters(), housekeeping_field(task, scope, result), 1)
        if result != "skipped":
            now = time.time()
            pipe.hset(state, f"{task}:{scope}:step_at", now)
            if result == "more":
                pipe.hsetnx(state, f"{task}:{scope}:behind_since", now)
            else:
                pipe.hdel(state, f"{task}:{scope}:behind_since")
        pipe.execute()
    except RedisError as exc:
        # What a step did stands whether or not it is recorded: the record feeds a gauge, never the work.
        logger.warning("housekeeping %s (%s): its step could not be recorded: %s", task, scope, type(exc).__name__)


def behind(client, now=None):
    """{(task, scope): seconds behind} of the tasks recorded on ``client``: since the first step that left work, for
    a task that has not caught up since; 0 for one that caught up at its last step."""
    now = time.time() if now is None else now
    found = {}
    for field, value in client.hgetall(keys.housekeeping_state()).items():
        task, scope, when = field.decode().rsplit(":", 2)
        if when == "behind_since":
            found[(task, scope)] = max(0.0, now - float(value))
        else:
            found.setdefault((task, scope), 0.0)
    return found
