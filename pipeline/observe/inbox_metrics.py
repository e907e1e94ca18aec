"""The exporter's inbox families: items created and folded, reads, prunes, escalations sent, cancelled and due."""

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from pipeline.conf import CLASSES
from pipeline.connections import class_redis
from pipeline.metrics import INBOX_PRUNED, INBOX_READS
from pipeline.observe.families import labelled
from pipeline.redis import keys

# Counter fields "<prefix>:<label>:<label>" -> (family, help, label names).
FAMILIES = {
    "inbox_items": (
        "sluice_inbox_items",
        "Sends to the inbox: a new item (created) or folded into the unread item of the same user, kind and entity",
        ["kind", "result"],
    ),
    "inbox_escalations": (
        "sluice_inbox_escalations",
        "Unread inbox items escalated to their kind's channels (sent), or read, archived or gone first (cancelled)",
        ["class", "result"],
    ),
}


def due(now):
    """Yield the escalations due, read from each class's Redis."""
    family = GaugeMetricFamily(
        "sluice_inbox_escalations_due",
        "Unread inbox items whose escalation is due and not finished yet (waiting for a drain, or claimed by one)",
        labels=["class"],
    )
    for klass in CLASSES:
        client = class_redis(klass)
        pipe = client.pipeline(transaction=False)
        pipe.zcount(keys.inbox_escalations(klass), "-inf", now)
        pipe.zcard(keys.inbox_escalating(klass))
        family.add_metric([klass], sum(pipe.execute()))
    yield family


def collect(counters):
    """Yield the inbox's metric families from the counters."""
    yield from labelled(FAMILIES, counters)
    reads = CounterMetricFamily("sluice_inbox_reads", "Inbox items marked read through the inbox API")
    reads.add_metric([], counters.get(INBOX_READS, 0))
    pruned = CounterMetricFamily("sluice_inbox_pruned", "Inbox items deleted past max_items or retention_days")
    pruned.add_metric([], counters.get(INBOX_PRUNED, 0))
    yield from (reads, pruned)
