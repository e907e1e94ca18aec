"""The exporter's provider families: breaker state and transitions, calls per provider, delivery statuses."""

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from pipeline.gates.breaker import states
from pipeline.metrics import DELIVERY_PRUNED, DELIVERY_UNMATCHED
from pipeline.observe.families import labelled

# Counter fields "<prefix>:<label>:<label>:<label>" -> (family, help, label names).
FAMILIES = {
    "provider_transitions": (
        "sluice_provider_transitions",
        "Circuit breaker state changes, by the state entered",
        ["channel", "provider", "to"],
    ),
    "provider_calls": (
        "sluice_provider_calls",
        "Calls to a provider: accepted, failed (transient), rejected (permanent), skipped (breaker open)",
        ["channel", "provider", "outcome"],
    ),
    "delivery_status": (
        "sluice_delivery_status",
        "Delivery status records that reached a status (sent, delivered, failed, bounced, complained)",
        ["channel", "provider", "status"],
    ),
    "tracking_events": (
        "sluice_tracking_events",
        "Events of the ESPs' tracking webhooks, by what became of them (pipeline.metrics.TRACKING_RESULTS)",
        ["provider", "result"],
    ),
    "suppressions": ("sluice_suppressions_added", "Addresses suppressed after a bounce or complaint", ["reason"]),
}


def collect(client, counters):
    """Yield the provider and delivery metric families, from the breakers' hashes and the counters."""
    state = GaugeMetricFamily(
        "sluice_provider_state", "Circuit breaker state: 0 closed, 1 half-open, 2 open", labels=["channel", "provider"]
    )
    forced = GaugeMetricFamily(
        "sluice_provider_forced", "1 while staff force the breaker open or closed", labels=["channel", "provider"]
    )
    for provider in states(client):
        state.add_metric([provider.channel, provider.provider], provider.state_value)
        forced.add_metric([provider.channel, provider.provider], 1 if provider.forced else 0)
    yield from (state, forced)
    yield from labelled(FAMILIES, counters)
    unmatched = CounterMetricFamily(
        "sluice_delivery_events_unmatched", "Provider status events that matched no delivery record"
    )
    unmatched.add_metric([], counters.get(DELIVERY_UNMATCHED, 0))
    pruned = CounterMetricFamily("sluice_delivery_records_pruned", "Delivery status records pruned after retention")
    pruned.add_metric([], counters.get(DELIVERY_PRUNED, 0))
    yield from (unmatched, pruned)
