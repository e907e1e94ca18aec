"""A bare Celery no-op task: what a worker costs with nothing of Sluice's in the task (bench cost's yardstick)."""

from pipeline.celery import task

NOOP_TASK = "sluice.bench.noop"


@task(name=NOOP_TASK, ignore_result=True, acks_late=True)
def noop(**kwargs):
    """Do nothing: the worker's cost is then Celery's and the transport's alone."""
