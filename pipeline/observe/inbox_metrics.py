"""The exporter's inbox families: items created and folded, reads, prunes, escalations sent and cancelled."""

from prometheus_client.core import CounterMetricFamily

from pipeline.metrics import INBOX_PRUNED, INBOX_READS
from pipeline.observe.families import labelled

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


def collect(counters):
    """Yield the inbox's metric families from the counters."""
    yield from labelled(FAMILIES, counters)
    reads = CounterMetricFamily("sluice_inbox_reads", "Inbox items marked read through the inbox API")
    reads.add_metric([], counters.get(INBOX_READS, 0))
    pruned = CounterMetricFamily("sluice_inbox_pruned", "Inbox items deleted past max_items or retention_days")
    pruned.add_metric([], counters.get(INBOX_PRUNED, 0))
    yield from (reads, pruned)
