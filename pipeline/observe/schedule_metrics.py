"""The exporter's scheduled-sends families: what became of them, how late they went out, and what is due next."""

import math

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

from pipeline.admission import schedule
from pipeline.conf import CLASSES
from pipeline.metrics import LATENESS_BUCKETS, SCHEDULED_RESULTS, scheduled_field

#: The look-aheads of sluice_scheduled_due, in seconds: what KEDA can scale a pool on before a spike arrives.
WITHIN_S = (60, 300, 900)


def collect(counters, now):
    """Yield the scheduled sends' families: their results and lateness from the counters, what is due from Redis."""
    results = CounterMetricFamily(
        "sluice_scheduled",
        "Scheduled sends by what became of them: scheduled, moved, cancelled, published, expired, rejected",
        labels=["class", "result"],
    )
    for klass in CLASSES:
        for result in SCHEDULED_RESULTS:
            results.add_metric([klass, result], counters.get(scheduled_field(klass, result), 0))
    yield results
    yield _lateness(counters)
    due = GaugeMetricFamily(
        "sluice_scheduled_due",
        "Scheduled sends due within the next `within` seconds: reserved seconds for a class that reserves "
        "(critical), else those staged",
        labels=["class", "within"],
    )
    for klass in CLASSES:
        for within in WITHIN_S:
            count = schedule.reserved_within(klass, within, now) if klass == "critical" else None
            if count is None:
                count = schedule.staged_within(klass, within, now)
            due.add_metric([klass, str(within)], count)
    yield due


def _lateness(counters):
    family = HistogramMetricFamily(
        "sluice_scheduled_lateness_seconds",
        "How long after its send_at a scheduled send went out (0 when early, within its kind's window)",
        labels=["class"],
    )
    for klass in CLASSES:
        base = f"scheduled_lateness:{klass}"
        running, buckets = 0, []
        for le in LATENESS_BUCKETS:
            running += counters.get(f"{base}:le:{le}", 0)
            buckets.append(("+Inf" if math.isinf(le) else repr(le), running))
        family.add_metric([klass], buckets, counters.get(f"{base}:sum", 0.0))
    return family
