"""The breaker under ten simulated minutes of random provider failure, with and without hysteresis."""

import pytest

from tests.integration.test_providers import (  # noqa: F401  (pytest finds the fixtures among them by name)
    clock,
    run_ten_minutes,
    sms,
    sms_channels,
    standins,
    transitions,
)


@pytest.mark.timeout(300)
def test_under_30_percent_random_failure_the_breaker_changes_state_a_handful_of_times(sms, standins, clock, settings):
    a, b = standins
    settings.SLUICE_CHANNELS = sms_channels(a, b, breaker_conf={})  # the shipped defaults
    a.set_mode("random")  # seeded: the same 30% of calls fail in every run
    changes = run_ten_minutes(sms, clock, rate_per_s=3)
    assert changes <= 4, transitions("a")
    delivered = a.accepted_ids() + b.accepted_ids()
    assert len(delivered) == len(set(delivered)) == 1800
    assert 0.25 < 1 - len(a.accepted_ids()) / a.calls < 0.35  # a really failed about 30% of its calls


@pytest.mark.timeout(300)
def test_without_hysteresis_the_same_traffic_flaps(sms, standins, clock, settings):
    a, b = standins
    naive = {"open_failure_ratio": 0.25, "close_failure_ratio": 0.0, "half_open_probes": 1, "window_s": 10}
    settings.SLUICE_CHANNELS = sms_channels(a, b, {**naive, "min_calls": 5, "min_open_s": 5, "max_open_s": 5})
    a.set_mode("random")
    assert run_ten_minutes(sms, clock, rate_per_s=3) >= 30
