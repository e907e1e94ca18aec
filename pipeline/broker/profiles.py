"""Worker pool profiles per class, and why each choice was made.

All pools share two settings: prefetch is disabled (pipeline.celery's FORCED settings), so a worker
takes a message only when a slot is free and queue depth stays the true backlog; and every send task
acks late (notifications.delivery.tasks), so a worker that dies mid-send leaves its message to be redelivered.
"""

from dataclasses import dataclass

from pipeline.broker.queues import queues_of_class


@dataclass(frozen=True)
class Profile:
    pool: str
    concurrency: int
    why: str


PROFILES = {
    "critical": Profile(
        pool="prefork",
        concurrency=4,
        why=(
            "One message per process at a time (no prefetch), acks late and requeues on worker "
            "loss: a reminder is never stuck behind another in a buffer, and a child that dies "
            "mid-send gives its message back. Processes isolate a misbehaving send from the others."
        ),
    ),
    "routine": Profile(
        pool="threads",
        concurrency=16,
        why=(
            "Sends wait on providers, not on the CPU, so threads give the most sends per core; "
            "16 in flight keep a provider at 50-100 ms a send near the incident's 55 msg/s per pod."
        ),
    ),
    "background": Profile(
        pool="threads",
        concurrency=8,
        why=(
            "Same I/O-bound reasoning as routine, with fewer threads: background is 14% of the "
            "traffic and collapses under load, so it gets less of the machine."
        ),
    ),
}


def worker_argv(klass, extra=()):
    """The celery worker arguments that run ``klass``'s pool with its profile; ``extra`` wins."""
    profile = PROFILES[klass]
    return [
        "worker",
        "--queues",
        queues_of_class(klass),
        "--hostname",
        f"{klass}@%h",
        "--pool",
        profile.pool,
        "--concurrency",
        str(profile.concurrency),
        "--task-events",
        # Celery's default (WARNING) prints nothing while the pool works: one line per batch and per flush show.
        "--loglevel",
        "INFO",
        *extra,
    ]
