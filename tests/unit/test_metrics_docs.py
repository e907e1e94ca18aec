"""docs/operations.md's metrics table names every metric the exporter serves, so an operator finds each one there."""

import re

from pipeline.observe.exporter import SluiceCollector
from sluice_tools.processes import ROOT


def documented():
    text = (ROOT / "docs" / "operations.md").read_text()
    section = text.split("## Observability", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `sluice_")]
    # A counter is served as <name>_total; prometheus_client names its family without the suffix.
    return {name.removesuffix("_total") for row in rows for name in re.findall(r"`(sluice_\w+)", row)}


def test_every_metric_the_exporter_serves_is_in_the_table(redis_client):
    served = {family.name for family in SluiceCollector(120).collect()}
    assert served, "the exporter served nothing"
    missing = sorted(served - documented())
    assert not missing, f"docs/operations.md's metrics table lacks {missing}"
