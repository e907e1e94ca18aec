"""Capacity math on synthetic inputs, and the command on samples in Redis."""

import json
import time

import pytest
from django.core.management import call_command

from pipeline.observe.capacity_model import assess, rates_from_samples
from pipeline.observe.window import samples_key


def test_stable_pool():
    a = assess("routine", arrival=20, mu=10, workers=4, depth=0, window_s=3600, target_rho=0.7)
    assert (a.rho, a.n_min, a.n_safe, a.verdict) == (0.5, 2.0, 3, "stable")
    assert a.backlog_debt == 0  # it keeps up: it owes nothing (never a negative debt)


def test_at_risk_pool():
    a = assess("routine", arrival=36, mu=10, workers=4, depth=100, window_s=60)
    assert a.rho == pytest.approx(0.9)
    assert a.verdict.startswith("at risk")
    assert a.drain_time_s == pytest.approx(100 / 4)


def test_pool_that_cannot_catch_up_needs_more_workers():
    a = assess("routine", arrival=55, mu=10, workers=4, depth=2048, window_s=60)
    assert a.verdict == "will not catch up: needs >= 6 workers"
    assert a.drain_time_s is None
    assert a.backlog_debt == (55 - 40) * 60


def test_shared_channel_limit_is_named_when_it_is_the_bottleneck():
    a = assess("background", arrival=30, mu=10, workers=8, depth=10, window_s=60, channel_limit=20)
    assert a.service_per_s == 20
    assert "channel's limit (20/s)" in a.verdict


def test_rates_from_samples():
    samples = [{"t": 0, "done": 0, "arrived": 0, "send_s": 0}, {"t": 10, "done": 100, "arrived": 150, "send_s": 5}]
    assert rates_from_samples(samples) == (15.0, 20.0)


def test_command_reports_each_queue(redis_client, capsys):

    now = time.time()
    for t, done, arrived, send_s in ((-60, 0, 0, 0), (0, 600, 1200, 30)):
        point = {"t": now + t, "latency": 1, "depth": 5, "done": done, "arrived": arrived, "send_s": send_s}
        redis_client.zadd(samples_key("routine"), {json.dumps(point): now + t})
    call_command(
        "capacity",
        "--window",
        "10m",
        "--workers",
        "routine=4",
        "--workers",
        "critical=1",
        "--workers",
        "background=1",
        "--json",
    )
    routine = json.loads(capsys.readouterr().out)[1]
    assert routine["arrival_per_s"] == pytest.approx(20)
    assert routine["mu_per_worker"] == pytest.approx(20)
    assert routine["verdict"] == "stable"
