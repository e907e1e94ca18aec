"""Counter families read back from the counters hash: fields "<prefix>:<label>:<label>" become labelled samples."""

from prometheus_client.core import CounterMetricFamily


def labelled(families, counters):
    """One CounterMetricFamily per entry of ``families`` (field prefix -> (name, help, label names)), holding every
    counter whose field has that prefix and one value per label; other fields are left out."""
    built = {
        prefix: CounterMetricFamily(name, text, labels=labels) for prefix, (name, text, labels) in families.items()
    }
    for field, value in sorted(counters.items()):
        parts = field.split(":")
        family = built.get(parts[0])
        if family is not None and len(parts) == len(families[parts[0]][2]) + 1:
            family.add_metric(parts[1:], value)
    return list(built.values())
