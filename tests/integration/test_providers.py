"""Failover between two provider stand-ins (HTTP servers on loopback): healthy, 5xx, timing out, 30% at random."""

import time

import pytest
from celery.contrib.testing.worker import start_worker

from notifications import notify
from notifications.channels.base import Message, PermanentSendError, TransientSendError
from notifications.delivery import failover
from notifications.models import Delivery
from pipeline.broker import deadletters
from pipeline.celery import app
from pipeline.conf import sluice_settings
from pipeline.gates import breaker
from pipeline.metrics import read_counters
from sluice_tools.bench.standin import ProviderStandIn
from tests.unit.test_breaker import Clock
from tests.waiting import settled, wait_for

HTTP = "notifications.channels.http_provider.HttpProviderChannel"
LOCMEM = "notifications.channels.locmem.LocmemChannel"
BREAKER = {"window_s": 60, "min_calls": 10, "min_open_s": 30, "half_open_probes": 3, "close_failure_ratio": 0.34}


def sms_channels(a, b, breaker_conf=BREAKER, timeout_s=2.0):
    options = {"recipient": "payload.phone", "timeout_s": timeout_s, "message_id_field": "sid"}
    return {
        "sms": {
            "providers": [
                {"name": "a", "backend": HTTP, "options": {**options, "url": a.url}},
                {"name": "b", "backend": HTTP, "options": {**options, "url": b.url}},
            ],
            "breaker": breaker_conf,
        },
        "email": {"backend": LOCMEM},
        "push": {"backend": LOCMEM},
    }


@pytest.fixture
def standins():
    with ProviderStandIn("a") as a, ProviderStandIn("b") as b:
        yield a, b


@pytest.fixture
def clock(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(breaker, "clock", clock)
    return clock


@pytest.fixture
def sms(settings, standins, redis_client, clock, db):
    """Providers a then b on the SMS channel; send(n) sends a message through them, as a send task would."""
    settings.SLUICE_CHANNELS = sms_channels(*standins)
    settings.SLUICE_KINDS = {"login.code": {"class": "critical", "channels": ["sms"], "expires_after_s": 300}}

    def send(notification_id, budget_s=10.0):
        message = Message(
            id=notification_id,
            channel="sms",
            kind="login.code",
            klass="critical",
            user_id=None,
            entity_id="e",
            subject="Your code",
            body="Your code is 123456",
            payload={"phone": "+15550100"},
            deadline=time.monotonic() + budget_s,
        )
        (result,) = failover.send([message], sluice_settings().channels["sms"])
        if isinstance(result, BaseException):
            raise result
        return result

    return send


def transitions(provider):
    counters = read_counters()
    return {k: counters.get(f"provider_transitions:sms:{provider}:{k}", 0) for k in ("open", "half_open", "closed")}


def test_failover_delivers_every_message_once_through_the_healthy_one(sms, standins):
    a, b = standins
    a.set_mode("fail")
    ids = [f"n{i}" for i in range(30)]
    assert [sms(n) for n in ids] == [("b", f"b-{i + 1}") for i in range(30)]
    assert a.accepted_ids() == []
    assert b.accepted_ids() == ids
    # The breaker opened within its window: after min_calls failures, a was skipped without a call.
    assert a.calls == 10
    counters = read_counters()
    assert counters["provider_calls:sms:a:failed"] == 10
    assert counters["provider_calls:sms:a:skipped"] == 20
    assert counters["provider_calls:sms:b:accepted"] == 30
    record = Delivery.objects.get(notification_id="n0", channel="sms")
    assert (record.provider, record.provider_message_id, record.status) == ("b", "b-1", "sent")


def test_a_timing_out_provider_costs_its_timeout_and_never_more_than_the_budget(sms, standins, settings):
    a, b = standins
    a.set_mode("timeout")
    settings.SLUICE_CHANNELS = sms_channels(a, b, timeout_s=0.3)
    started = time.monotonic()
    assert sms("n1")[0] == "b"
    assert time.monotonic() - started < 3  # a's 0.3 s timeout, then b; a hang of 30 s never reached
    started = time.monotonic()
    with pytest.raises(TransientSendError, match="no time left in the send budget"):
        sms("n2", budget_s=0.2)  # a's timeout is cut to the budget, and nothing is left for b
    assert time.monotonic() - started < 3
    assert b.accepted_ids() == ["n1"]
    assert read_counters()["provider_calls:sms:a:failed"] == 2


def test_a_permanent_error_does_not_fail_over(sms, standins):
    a, b = standins
    a.set_mode("permanent")
    for n in range(15):
        with pytest.raises(PermanentSendError, match="HTTP 400"):
            sms(f"n{n}")
    assert b.calls == 0
    assert transitions("a") == {"open": 0, "half_open": 0, "closed": 0}  # a works: the number is bad


def test_the_breaker_opens_within_its_window_probes_and_closes_after_recovery(sms, standins, clock):
    a, b = standins
    a.set_mode("fail")
    for n in range(12):
        sms(f"down{n}")
        clock.advance(1)
    assert a.calls == 10
    assert transitions("a")["open"] == 1
    a.set_mode("healthy")
    for n in range(10):  # a has recovered, but stays open for min_open_s: b keeps taking the sends
        assert sms(f"open{n}")[0] == "b"
        clock.advance(1)
    assert a.calls == 10
    clock.advance(30)
    assert [sms(f"probe{n}")[0] for n in range(3)] == ["a", "a", "a"]  # the three probes succeed
    assert transitions("a") == {"open": 1, "half_open": 1, "closed": 1}
    assert sms("after")[0] == "a"
    assert sorted(a.accepted_ids() + b.accepted_ids()) == sorted(
        [f"down{n}" for n in range(12)] + [f"open{n}" for n in range(10)] + [f"probe{n}" for n in range(3)] + ["after"]
    )


def test_when_every_breaker_is_open_the_retry_waits_for_the_first_probes(sms, standins, clock):
    a, b = standins
    a.set_mode("fail")
    b.set_mode("fail")
    for n in range(10):
        with pytest.raises(TransientSendError, match=r"a: TransientSendError.*b: TransientSendError"):
            sms(f"n{n}")
    clock.advance(5)
    with pytest.raises(TransientSendError, match="a: breaker open; b: breaker open") as err:
        sms("later")
    assert err.value.retry_after_s == pytest.approx(25, abs=1)
    assert (a.calls, b.calls) == (10, 10)


def run_ten_minutes(sms, clock, rate_per_s):
    for n in range(600 * rate_per_s):
        sms(f"n{n}")
        clock.advance(1 / rate_per_s)
    return sum(transitions("a").values())


@pytest.fixture
def worker(redis_client, settings, standins, transactional_db):
    settings.SLUICE_CHANNELS = sms_channels(*standins)
    settings.SLUICE_KINDS = {"login.code": {"class": "critical", "channels": ["sms"], "expires_after_s": 300}}
    # One thread: the test database is SQLite in memory, whose shared cache refuses concurrent writers at once
    # (a file or PostgreSQL makes them wait); the records are what this test checks.
    with start_worker(
        app,
        pool="threads",
        concurrency=1,
        perform_ping_check=False,
        queues=["critical"],
        loglevel="WARNING",
        shutdown_timeout=30,
    ):
        yield standins


def test_through_a_worker_failover_sends_each_notification_once_and_records_the_provider(worker, user):
    a, b = worker
    a.set_mode("fail")
    for n in range(8):
        notify(user, "login.code", entity_id=f"s{n}", payload={"phone": "+15550100"})
    wait_for(lambda: len(b.accepted_ids()) == 8)
    wait_for(lambda: settled("critical"), what="every send acked")
    assert len(set(b.accepted_ids())) == 8
    assert a.accepted_ids() == []
    assert set(Delivery.objects.values_list("provider", "status")) == {("b", "sent")}
    assert set(Delivery.objects.values_list("notification_id", flat=True)) == set(b.accepted_ids())
    assert deadletters.size() == 0


def test_through_a_worker_a_permanent_error_is_dead_lettered_without_failover(worker, user):
    a, b = worker
    a.set_mode("permanent")
    notify(user, "login.code", entity_id="s1", payload={"phone": "+1555"})
    wait_for(lambda: deadletters.size() == 1)
    [letter] = deadletters.entries()
    assert (letter.reason, letter.channels) == ("permanent", ["sms"])
    assert b.calls == 0


def test_through_a_worker_every_provider_down_is_retried_until_one_recovers(worker, user):
    a, b = worker
    a.set_mode("fail")
    b.set_mode("fail")
    notify(user, "login.code", entity_id="s1", payload={"phone": "+1555"})
    wait_for(lambda: a.calls >= 1 and b.calls >= 1)  # the retry comes a second later
    b.set_mode("healthy")
    wait_for(lambda: len(b.accepted_ids()) == 1)
    assert deadletters.size() == 0
