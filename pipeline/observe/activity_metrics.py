"""The exporter's activity log families: entries dropped from a buffer before the drain stored them, drained, pruned,
and each buffer's length."""

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from redis.exceptions import RedisError

from pipeline import activity_fields
from pipeline.connections import classes_by_redis
from pipeline.metrics import ACTIVITY_DRAINED, ACTIVITY_DROPPED, ACTIVITY_PRUNED
from pipeline.redis import keys


def collect(counters):
    """Yield the activity log's families: per Redis (``scope``: the first class on it, as the drain names it) what
    its buffer dropped and holds, read from the stream itself; the drained and pruned counts from the counters."""
    dropped = CounterMetricFamily(
        ACTIVITY_DROPPED,
        "Activity entries a buffer's bound (SLUICE_ACTIVITY buffer_entries) trimmed before the drain stored them",
        labels=["scope"],
    )
    buffered = GaugeMetricFamily(
        "sluice_activity_buffered_entries",
        "Activity entries in a Redis buffer, waiting for the drain",
        labels=["scope"],
    )
    for client, classes in classes_by_redis():
        try:
            lost = activity_fields.dropped(client)
            length = client.xlen(keys.activity())
        except RedisError:
            continue  # that Redis's queue families say it is down
        dropped.add_metric([classes[0]], lost or 0)
        buffered.add_metric([classes[0]], length)
    drained = CounterMetricFamily("sluice_activity_drained", "Activity entries the drain stored in the database")
    drained.add_metric([], counters.get(ACTIVITY_DRAINED, 0))
    pruned = CounterMetricFamily(
        "sluice_activity_pruned", "Activity entries deleted past SLUICE_ACTIVITY retention_days"
    )
    pruned.add_metric([], counters.get(ACTIVITY_PRUNED, 0))
    yield from (dropped, buffered, drained, pruned)
