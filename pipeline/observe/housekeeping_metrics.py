"""The exporter's housekeeping families: steps of the periodic and control tasks, and how far behind each is."""

from prometheus_client.core import GaugeMetricFamily

from pipeline import housekeeping
from pipeline.connections import every_redis
from pipeline.observe.families import labelled

FAMILIES = {
    "housekeeping": (
        "sluice_housekeeping_steps",
        "Steps of a housekeeping task (flush, drains, escalations, prunes) that caught up, left work for the next step "
        "(more), or were skipped because another step of it held its lease",
        ["task", "scope", "result"],
    ),
}


def collect(counters, now):
    """Yield the housekeeping families: the steps from the counters, and each task's lag from every Redis."""
    yield from labelled(FAMILIES, counters)
    behind = GaugeMetricFamily(
        "sluice_housekeeping_behind_seconds",
        "Seconds since a housekeeping task's first step that left work, while it has not caught up since (0: its last "
        "step caught up)",
        labels=["task", "scope"],
    )
    found = {}
    for client in every_redis():
        for labels, seconds in housekeeping.behind(client, now).items():
            found[labels] = max(seconds, found.get(labels, 0.0))
    for (task, scope), seconds in sorted(found.items()):
        behind.add_metric([task, scope], seconds)
    yield behind
