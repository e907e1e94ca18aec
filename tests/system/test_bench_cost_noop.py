"""bench cost, small: critical's single sends and no-ops drained side by side give critical_vs_noop's figures."""

import io

import pytest
from django.test import override_settings

from sluice_tools.bench import cost


@pytest.mark.django_db
@pytest.mark.timeout(120)
def test_critical_against_the_noop_is_measured_side_by_side(redis_client, redis_server):
    with override_settings(SLUICE_KINDS=cost.KINDS, SLUICE_CHANNELS=cost.CHANNELS):
        part = cost.Run(redis_server.url, 20, 1, io.StringIO()).against_noop("critical")
    assert part["throughput_ratio_vs_noop"] > 0
    assert len(part["sluice_per_s_rounds"]) == len(part["noop_per_s_rounds"]) == 1
    scripts = part["worker"]["commands_by_name_per_event"]
    # The fetch's scripts, then the claim with the gate, and the end of the send: two more than the no-op's.
    assert scripts["evalsha"] > part["noop_worker"]["commands_by_name_per_event"].get("evalsha", 0)
