"""The circuit breaker's rules in Redis, driven by a clock the test controls: open, probe, close, force."""

import pytest
from django.core.exceptions import ImproperlyConfigured

from pipeline.conf import BreakerConfig, sluice_settings
from pipeline.gates import breaker
from pipeline.metrics import read_counters
from pipeline.redis import keys

CONF = BreakerConfig(
    window_s=60,
    min_calls=10,
    open_failure_ratio=0.5,
    open_slow_ratio=0.5,
    slow_call_s=1.0,
    min_open_s=30,
    max_open_s=120,
    half_open_probes=3,
    close_failure_ratio=0.34,
    open_consecutive_failures=0,  # the ratios alone, unless a test says otherwise
)


class Clock:
    """Seconds since the epoch that move only when the test says so."""

    def __init__(self, now=1_000_000.0):
        self.now = now

    def __call__(self):
        return self.now

    def advance(self, seconds):
        self.now += seconds


@pytest.fixture
def clock(redis_client, monkeypatch):
    clock = Clock()
    monkeypatch.setattr(breaker, "clock", clock)
    return clock


def call(outcome="accepted", seconds=0.01, conf=CONF, provider="a"):
    """One call through the breaker: ask, and report what happened if it was allowed."""
    permit = breaker.allow("sms", provider, conf)
    if permit.allowed:
        breaker.record("sms", provider, conf, outcome, seconds, permit)
    return permit


def transitions(provider="a"):
    counters = read_counters()
    return {to: counters.get(f"provider_transitions:sms:{provider}:{to}", 0) for to in ("open", "half_open", "closed")}


def state(provider="a"):
    raw = breaker.shared_redis().hget(keys.breaker("sms", provider), "state")
    return (raw or b"closed").decode()


def test_a_breaker_stays_closed_below_the_minimum_number_of_calls(clock):
    for _ in range(9):
        call("failed")
    assert state() == "closed"
    call("failed")
    assert state() == "open"
    assert transitions()["open"] == 1


def test_it_opens_on_the_failure_ratio_over_the_window_not_on_old_failures(clock):
    for _ in range(6):
        call("failed")
    clock.advance(61)  # those failures slid out of the window
    for _ in range(6):
        call("accepted")
    for _ in range(4):
        call("failed")
    assert state() == "closed"  # 4 of 10 in the window
    call("failed")
    assert state() == "closed"  # 5 of 11
    call("failed")
    assert state() == "open"  # 6 of 12: at the 50% threshold


def test_it_opens_after_failures_in_a_row_before_the_window_has_its_minimum(clock):
    conf = BreakerConfig(**{**vars(CONF), "min_calls": 1000, "open_consecutive_failures": 5})
    for outcome in ["failed"] * 4 + ["accepted"] + ["failed"] * 4:
        call(outcome, conf=conf)
    assert state() == "closed"  # never five in a row
    call("failed", conf=conf)
    assert state() == "open"


def test_it_opens_on_slow_calls_that_succeed(clock):
    for _ in range(10):
        call("accepted", seconds=1.5)
    assert state() == "open"


def test_a_refused_recipient_is_not_a_provider_failure(clock):
    for _ in range(20):
        call("rejected")
    assert state() == "closed"


def test_open_refuses_calls_then_sends_a_limited_round_of_probes(clock):
    for _ in range(10):
        call("failed")
    assert not call().allowed
    clock.advance(29)
    assert not call().allowed
    clock.advance(1)
    permits = [breaker.allow("sms", "a", CONF) for _ in range(5)]
    assert [p.state for p in permits] == ["probe", "probe", "probe", "half_open", "half_open"]
    assert [p.allowed for p in permits] == [True, True, True, False, False]
    for permit in permits[:3]:
        breaker.record("sms", "a", CONF, "accepted", 0.01, permit)
    assert state() == "closed"
    assert transitions() == {"open": 1, "half_open": 1, "closed": 1}
    counters = read_counters()
    assert counters["provider_calls:sms:a:skipped"] == 4


def test_a_recovered_provider_closes_with_an_empty_window(clock):
    for _ in range(10):
        call("failed")
    clock.advance(30)
    for _ in range(3):
        call("accepted")
    assert state() == "closed"
    # The ten failures that opened it are forgotten: one more failure does not reopen it.
    call("failed")
    assert state() == "closed"


def test_a_failed_round_of_probes_reopens_for_twice_as_long_up_to_the_maximum(clock):
    for _ in range(10):
        call("failed")
    open_for = []
    for _ in range(4):
        opened_at = clock.now
        while not _probe_fails():
            clock.advance(1)
        open_for.append(round(clock.now - opened_at))
    assert open_for == [30, 60, 120, 120]
    assert state() == "open"


def _probe_fails():
    """Try one call; when it is a probe, fail it twice (more than close_failure_ratio allows) and say so."""
    permit = breaker.allow("sms", "a", CONF)
    if not permit.allowed:
        return False
    breaker.record("sms", "a", CONF, "failed", 0.01, permit)
    second = breaker.allow("sms", "a", CONF)
    breaker.record("sms", "a", CONF, "failed", 0.01, second)
    return True


def test_one_bad_probe_of_three_is_within_the_closing_threshold(clock):
    for _ in range(10):
        call("failed")
    clock.advance(30)
    call("failed")
    call("accepted")
    assert state() == "half_open"
    call("accepted")
    assert state() == "closed"


def test_a_prober_that_died_frees_its_slot_after_its_lease(clock):
    for _ in range(10):
        call("failed")
    clock.advance(30)
    held = [breaker.allow("sms", "a", CONF) for _ in range(3)]  # three probers that never report
    assert all(p.allowed for p in held)
    assert not breaker.allow("sms", "a", CONF).allowed
    clock.advance(breaker.PROBE_LEASE_MS / 1000 + 1)
    assert breaker.allow("sms", "a", CONF).state == "probe"


def test_a_late_answer_from_before_the_breaker_opened_does_not_decide_the_probes(clock):
    early = breaker.allow("sms", "a", CONF)  # a slow call that started while closed
    for _ in range(10):
        call("failed")
    clock.advance(30)
    probe = breaker.allow("sms", "a", CONF)
    breaker.record("sms", "a", CONF, "failed", 0.01, early)
    assert state() == "half_open"
    breaker.record("sms", "a", CONF, "accepted", 0.01, probe)
    assert state() == "half_open"


def test_staff_force_a_breaker_open_or_closed_and_release_it(clock):
    assert breaker.force("sms", "a", "open") == "open"
    assert not call().allowed
    assert breaker.force("sms", "a", "closed") == "closed"
    for _ in range(20):
        assert call("failed").allowed  # forced closed: staff decide, whatever the provider does
    assert state() == "closed"
    assert breaker.force("sms", "a", None) == "closed"
    assert call().allowed
    assert transitions() == {"open": 1, "half_open": 0, "closed": 1}
    with pytest.raises(ValueError, match="forced"):
        breaker.force("sms", "a", "half_open")


def test_without_a_breaker_every_call_goes_and_is_counted(clock):
    for _ in range(20):
        assert call("failed", conf=None).allowed
    assert read_counters()["provider_calls:sms:a:failed"] == 20
    assert not breaker.shared_redis().exists(keys.breaker("sms", "a"))


def test_states_list_every_provider_in_order_with_its_window(clock, settings):
    settings.SLUICE_CHANNELS = {
        "sms": {
            "providers": [
                {"name": "a", "backend": "tests.scripted.ScriptedChannel", "breaker": {"min_calls": 10}},
                {"name": "b", "backend": "tests.scripted.ScriptedChannel", "breaker": None},
            ]
        },
        "email": {"backend": "tests.scripted.ScriptedChannel"},
        "push": {"backend": "tests.scripted.ScriptedChannel"},
    }
    conf = sluice_settings().channels["sms"].providers[0].breaker
    for outcome, seconds in [("failed", 0.1)] * 4 + [("accepted", 3.0)] * 3 + [("accepted", 0.1)] * 3:
        call(outcome, seconds=seconds, conf=conf)
    a, b = breaker.states()
    assert (a.provider, a.position, a.state, a.calls, a.failed, a.slow) == ("a", 0, "closed", 10, 4, 3)
    assert a.has_breaker
    assert not b.has_breaker
    assert (b.provider, b.state, b.calls) == ("b", "closed", 0)
    call("failed", conf=conf)
    call("failed", conf=conf)
    [a, _b] = breaker.states()
    assert a.state == "open"
    assert a.state_value == 2
    assert a.open_until == pytest.approx(clock.now + conf.min_open_s, abs=1)


@pytest.mark.parametrize(
    ("breaker_conf", "words"),
    [
        ({"close_failure_ratio": 0.5}, "must be below 'open_failure_ratio'"),
        ({"open_failure_ratio": 0}, "open_failure_ratio'] must be in (0, 1]"),
        ({"min_calls": 0}, "min_calls'] must be an integer >= 1"),
        ({"max_open_s": 10, "min_open_s": 20}, "max_open_s'] must be >= 'min_open_s'"),
        ({"windows": 3}, "unknown keys ['windows']"),
        ({"slow_call_s": "2"}, "slow_call_s'] must be a number"),
    ],
)
def test_a_bad_breaker_setting_names_itself(settings, breaker_conf, words):
    settings.SLUICE_CHANNELS = {
        "sms": {"providers": [{"name": "a", "backend": "tests.scripted.ScriptedChannel"}], "breaker": breaker_conf}
    }
    with pytest.raises(ImproperlyConfigured, match=r"SLUICE_CHANNELS\['sms'\]\['providers'\]\[0\]\['breaker'\]") as err:
        sluice_settings()
    assert words in str(err.value)


@pytest.mark.parametrize(
    ("sms", "words"),
    [
        ({"providers": []}, "must be a non-empty list"),
        ({"providers": [{"name": "A B", "backend": "tests.scripted.ScriptedChannel"}]}, "['name'] must match"),
        ({"providers": [{"name": "a", "backend": "tests.scripted.ScriptedChannel"}] * 2}, "is used twice"),
        ({"providers": [{"name": "a", "backend": "no.such.Backend"}]}, "cannot be imported"),
        ({"backend": "tests.scripted.ScriptedChannel", "providers": []}, "either 'backend'"),
        ({"backend": "tests.scripted.ScriptedChannel", "breaker": {}}, "a breaker guards providers"),
    ],
)
def test_a_bad_provider_list_names_itself(settings, sms, words):
    settings.SLUICE_CHANNELS = {"sms": sms}
    with pytest.raises(ImproperlyConfigured, match=r"SLUICE_CHANNELS\['sms'\]") as err:
        sluice_settings()
    assert words in str(err.value)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("seed", range(4))
def test_the_shipped_defaults_hardly_move_under_30_percent_random_failure(clock, seed):
    import random

    conf, draw = BreakerConfig(), random.Random(seed)
    for _ in range(600 * 5):  # ten minutes at 5 calls a second
        call("failed" if draw.random() < 0.3 else "accepted", conf=conf)
        clock.advance(0.2)
    assert sum(transitions().values()) <= 3
