"""The topic fan-out's tasks: a step of a class's fan-outs on that class's own pool, and beat's tick that asks for
one while a job is unfinished (after a step was killed, or a broker refused the first ask)."""

import logging

from pipeline import housekeeping
from pipeline.broker.queues import queue_for_class
from pipeline.celery import task
from pipeline.connections import class_redis
from pipeline.errors import Unavailable

from . import steps
from .models import FANNING, TopicFanout

logger = logging.getLogger("sluice.topics")

STEP_TASK = "sluice.topics.fanout_step"
TICK_TASK = "sluice.topics.tick"
#: How long a killed step keeps its class's fan-outs waiting (housekeeping's lease; tools lower it).
LEASE_S = housekeeping.LEASE_S


@task(name=STEP_TASK, ignore_result=True)
def fanout_step(klass):
    """One step of ``klass``'s topic fan-outs, within housekeeping's budget and under its class's lease; the next step
    is asked for at the back of the queue while subscribers are left, so a critical send queued meanwhile goes
    first. Return how many subscribers it did."""
    client = class_redis(klass)
    with housekeeping.step(STEP_TASK, klass, client, lease_s=LEASE_S) as step:
        if step is None:
            return None  # another step of this class's fan-outs runs
        try:
            done = steps.run(klass, step)
        except Unavailable as exc:
            # The class's Redis cannot take the chunk now: nothing of it was counted, its cursor stays, and beat's
            # tick asks again; a step that raised would only be logged as a task failure.
            logger.warning("topic fan-outs (%s): a step stopped, the class's Redis is unavailable: %s", klass, exc)
            return None
    if step.more:
        ask(klass)
    return done


@task(name=TICK_TASK, ignore_result=True)
def tick():
    """Beat's tick: ask for a step of each class that has a fan-out unfinished; return the classes asked."""
    classes = TopicFanout.objects.filter(state=FANNING).order_by().values_list("klass", flat=True).distinct()
    return [klass for klass in sorted(classes) if ask(klass)]


def ask(klass):
    """Ask for a step of ``klass``'s fan-outs on its pool, unless one waits there already; return whether one was."""
    options = {"kwargs": {"klass": klass}, "queue": queue_for_class(klass)}
    return housekeeping.again(fanout_step, klass, class_redis(klass), **options)
