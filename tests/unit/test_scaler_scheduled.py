"""/scaler/<queue>'s scheduled load: the sends due within the look-ahead, their busiest span, and the worker slots
that span will keep busy, so KEDA can grow a pool before a spike of reminders arrives."""

import json
import time
import urllib.error

import pytest
from prometheus_client.parser import text_string_to_metric_families

from pipeline.admission import schedule
from pipeline.metrics import processed_field
from pipeline.observe.exporter import application
from pipeline.observe.window import sample
from pipeline.redis import keys

from .test_exporter import serve_app

SEND_S = 0.25  # seconds of sending per message, as the counters record it below


def sends(redis_client, klass, count, seconds):
    redis_client.hincrby(keys.counters(), f"notifications:{klass}:accepted", count)
    redis_client.hincrby(keys.counters(), processed_field(klass), count)
    redis_client.hincrbyfloat(keys.counters(), f"send_duration:sms:{klass}:sum", seconds)


@pytest.fixture
def scaler(redis_client):
    """GET a path of a live exporter (latency window 120 s, floor window 900 s): (status, JSON body)."""
    server, get = serve_app(application(120, 900))

    def call(path):
        try:
            return 200, json.loads(get(path))
        except urllib.error.HTTPError as exc:
            body = json.loads(exc.read())
            exc.close()
            return exc.code, body

    yield call
    server.shutdown()
    server.server_close()


def measured(redis_client, klass, now):
    """A floor window that measured arrivals of 2 a second, each SEND_S of sending: 0.5 busy slots."""
    sample(120, now=now - 600, retain_s=900)
    sends(redis_client, klass, 1200, 1200 * SEND_S)
    sample(120, now=now, retain_s=900)


def due_gauge(exporter_get, klass, within):
    families = text_string_to_metric_families(exporter_get("/metrics"))
    return next(
        s.value
        for f in families
        for s in f.samples
        if s.name == "sluice_scheduled_due" and s.labels == {"class": klass, "within": str(within)}
    )


def test_critical_reservations_ahead_become_the_busy_slots_their_busiest_second_needs(scaler, redis_client):
    now = time.time()
    measured(redis_client, "critical", now)
    spike = int(now) + 200
    # 440 reminders due at one second, 44 a second reserved: the ten seconds up to it hold 44 each.
    seconds, _ = schedule.reserve("critical", spike, spike - 9, [None] * 440, 44)
    assert sorted(set(seconds)) == list(range(spike - 9, spike + 1))
    schedule.reserve("critical", spike + 50, spike + 50, [None] * 3, 44)  # three more, later

    status, ahead = scaler("/scaler/critical?within=300&span=1")
    assert status == 200
    assert ahead["busy_slots"] == pytest.approx(2 * SEND_S, rel=0.01)
    assert (ahead["scheduled_within_seconds"], ahead["scheduled_span_seconds"]) == (300, 1)
    assert ahead["scheduled_due"] == 443
    assert ahead["scheduled_peak_per_second"] == 44
    assert ahead["send_seconds_per_message"] == pytest.approx(SEND_S)
    assert ahead["scheduled_busy_slots"] == pytest.approx(44 * SEND_S)
    assert ahead["busy_slots_ahead"] == pytest.approx(ahead["busy_slots"] + 44 * SEND_S, rel=0.01)
    # The same count as the gauge Prometheus scrapes.
    _server, get = serve_app(application(120, 900))
    try:
        assert due_gauge(get, "critical", 300) == 443
    finally:
        _server.shutdown()
        _server.server_close()

    # A longer span averages the spike with the quiet seconds around it.
    assert scaler("/scaler/critical?within=300&span=20")[1]["scheduled_peak_per_second"] == pytest.approx(22)
    # A look-ahead that ends before the spike sees nothing: the trigger reads the floor's busy slots.
    short = scaler("/scaler/critical?within=100")[1]
    assert (short["scheduled_due"], short["scheduled_busy_slots"]) == (0, 0)
    assert short["busy_slots_ahead"] == short["busy_slots"]


def test_staged_sends_of_a_class_that_does_not_reserve_are_counted_in_bins(scaler, redis_client):
    now = time.time()
    measured(redis_client, "routine", now)
    # 600 routine sends due within six seconds, and 50 more spread over a minute later on.
    burst = {i: now + 100 + i / 100 for i in range(600)}
    later = {1000 + i: now + 200 + i for i in range(50)}
    schedule.stage("routine", {**burst, **later})
    schedule.stage("routine", {5000: now - 5})  # due already: not ahead

    ahead = scaler("/scaler/routine?within=300&span=30")[1]
    assert ahead["scheduled_due"] == 650 == schedule.staged_within("routine", 300)
    assert ahead["scheduled_peak_per_second"] == pytest.approx(20)  # the 600 inside 30 s
    assert ahead["scheduled_busy_slots"] == pytest.approx(20 * SEND_S)
    # Past MAX_BINS seconds the bins widen (two seconds each for 1,200 s); the count stays exact.
    wide = scaler("/scaler/routine?within=1200&span=30")[1]
    assert wide["scheduled_due"] == 650
    assert wide["scheduled_peak_per_second"] == pytest.approx(20)


def test_a_pool_that_sent_nothing_over_the_floor_window_uses_the_send_time_of_the_last_hour(scaler, redis_client):
    now = time.time()
    sample(120, now=now - 1800, retain_s=3600)
    sends(redis_client, "critical", 100, 100 * SEND_S)
    sample(120, now=now - 1700, retain_s=3600)
    sample(120, now=now, retain_s=3600)
    idle = scaler("/scaler/critical")[1]
    assert idle["busy_slots"] == 0
    assert (idle["scheduled_due"], idle["scheduled_busy_slots"]) == (0, 0)
    spike = int(now) + 60
    schedule.reserve("critical", spike, spike, [None] * 40, 44)
    ahead = scaler("/scaler/critical")[1]  # the defaults: 300 s ahead, the busiest second
    assert (ahead["scheduled_within_seconds"], ahead["scheduled_span_seconds"]) == (300, 1)
    assert ahead["send_seconds_per_message"] == pytest.approx(SEND_S)
    assert ahead["busy_slots_ahead"] == pytest.approx(40 * SEND_S)


@pytest.mark.parametrize(
    ("query", "names"),
    [
        ("within=0", "within must be whole seconds from 1 to 3600, got '0'"),
        ("within=3601", "within must be whole seconds from 1 to 3600"),
        ("within=5m", "within must be whole seconds"),
        ("within=-1", "within must be whole seconds"),
        ("within=300&span=301", "span must be whole seconds from 1 to 300, got '301'"),
        ("span=1.5", "span must be whole seconds"),
        ("within=60&within=120", "within is given 2 times"),
        ("lookahead=300", "unknown parameter 'lookahead'"),
        ("within", "is not name=value pairs"),
    ],
)
def test_a_bad_query_is_a_400_that_names_it(scaler, query, names):
    status, body = scaler(f"/scaler/critical?{query}")
    assert status == 400
    assert names in body["error"]


def test_the_look_ahead_is_bounded_by_what_redis_stages(scaler, settings):
    settings.SLUICE_SCHEDULE = {"staged_s": 120}
    assert scaler("/scaler/routine")[1]["scheduled_within_seconds"] == 120
    status, body = scaler("/scaler/routine?within=300")
    assert status == 400
    assert "from 1 to 120" in body["error"]
    assert scaler("/scaler/nope?within=0")[0] == 404
