"""Background flood on SMS at 20/s with real worker processes: critical first, routine's share, the limit holds."""

import pytest

from sluice_tools.bench import flood


@pytest.mark.timeout(120)
def test_background_flood_on_a_rate_limited_channel(redis_client, redis_server):
    result = flood.summarize(flood.run(redis_server.url, gate_enabled=True, seconds=8, min_share=0.2))
    sms = result["sms_sent_by_class"]
    assert result["critical_sent"] >= 10
    # One token interval (50 ms) plus the hold window (200 ms) is the design bound; allow for a noisy VM.
    assert result["critical_p99_ms"] < 1000
    # Token bucket, burst 1: at most rate + burst sends start in any one second, across 3 processes.
    assert result["max_rate_observed_per_s"] <= 21
    assert sms["routine"] / sum(sms.values()) >= 0.1
    assert sms["background"] > 0
    # Email shares the background pool but not the SMS gate: it keeps flowing while SMS is saturated.
    assert result["email_sent"] >= 10
