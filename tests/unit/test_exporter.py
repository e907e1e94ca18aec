"""The exporter against queues with known contents: latency (published_at, ETAs, priority sub-lists), windows,
exact counters, the KEDA endpoint, and no personal data in anything it serves."""

import json
import threading
import time
import urllib.error
import urllib.request
from datetime import UTC, datetime, timedelta
from wsgiref.simple_server import make_server

import pytest
from prometheus_client.parser import text_string_to_metric_families

from notifications import notify
from pipeline.broker.message import envelope
from pipeline.metrics import processed_field
from pipeline.observe.exporter import _QuietHandler, _Server, application
from pipeline.observe.window import sample
from pipeline.redis import keys
from pipeline.sending.claims import finish_send


def message(queue, age=0, eta=None):
    raw = json.loads(envelope("sluice.send.routine", "id1", "{}", queue, "{}", published_at=time.time() - age))
    if eta is not None:
        raw["headers"]["eta"] = eta.isoformat()
    return json.dumps(raw)


@pytest.fixture
def exporter(redis_client):
    server = make_server("127.0.0.1", 0, application(120), server_class=_Server, handler_class=_QuietHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_port}"

    def get(path):
        with urllib.request.urlopen(base + path, timeout=10) as response:
            return response.read().decode()

    yield get
    server.shutdown()
    server.server_close()


def metrics(text):
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
    }


def test_latency_counts_from_published_at_and_past_etas_and_skips_future_etas(exporter, redis_client):
    future = datetime.now(UTC) + timedelta(minutes=5)
    past = datetime.now(UTC) - timedelta(seconds=40)
    # Oldest first at the tail: a future-ETA message is there, but is not waiting; the next one is 30 s old.
    redis_client.lpush(
        "routine", message("routine", age=300, eta=future), message("routine", age=30), message("routine", age=1)
    )
    redis_client.lpush("critical", message("critical", age=5, eta=past))
    redis_client.lpush(keys.priority_lists("background")[2], message("background", age=50))
    redis_client.lpush("background", message("background", age=10))
    found = metrics(exporter("/metrics"))
    latency = {q: found["sluice_queue_latency_seconds", (("queue", q),)] for q in ("critical", "routine", "background")}
    assert latency["routine"] == pytest.approx(30, abs=3)
    assert latency["critical"] == pytest.approx(40, abs=3)  # from the ETA, not from published_at
    assert latency["background"] == pytest.approx(50, abs=3)  # the priority sub-list's message is older
    assert found["sluice_queue_depth", (("queue", "routine"),)] == 3
    assert found["sluice_queue_depth", (("queue", "background"),)] == 2
    assert found["sluice_queue_capacity", (("queue", "routine"),)] == 2048


def test_window_drain_time_and_the_keda_endpoint(exporter, redis_client):
    now = time.time()
    redis_client.lpush("routine", *[message("routine", age=20)] * 100)
    sample(120, now=now - 60)
    redis_client.hincrby(keys.counters(), processed_field("routine"), 300)  # 300 done in 60 s: 5/s
    redis_client.hincrby(keys.counters(), "notifications:routine:accepted", 240)  # 4 arrive a second
    redis_client.hincrbyfloat(keys.counters(), "send_duration:push:routine:sum", 150)  # 0.5 s a message
    sample(120, now=now)
    payload = json.loads(exporter("/scaler/routine"))
    assert payload["depth"] == 100
    assert payload["drain_time_seconds"] == pytest.approx(20, rel=0.01)  # 100 / 5 per s
    assert payload["busy_slots"] == pytest.approx(2.0, rel=0.01)  # 4 a second x 0.5 s
    assert payload["latency_window_max_seconds"] >= 19
    found = metrics(exporter("/metrics"))
    assert found["sluice_drain_time_seconds", (("queue", "routine"),)] == pytest.approx(20, rel=0.01)
    assert found["sluice_queue_latency_window_seconds", (("queue", "routine"), ("stat", "max"))] >= 19
    assert float(redis_client.get(keys.drain_rate("routine"))) == pytest.approx(5)
    with pytest.raises(urllib.error.HTTPError) as missing:
        exporter("/scaler/nope")
    assert missing.value.code == 404
    missing.value.close()


def test_counters_are_exact_and_carry_no_personal_data(exporter, redis_client, db, django_user_model, settings):
    settings.SLUICE_QUEUES = {"routine": {"capacity": 2}}
    user = django_user_model.objects.create(pk=987654321, username="seeded-user-name")
    for i in range(5):
        notify(user, "task.comment", entity_id="entity-seeded-id", payload={"secret": "hunter2-seeded", "i": i})
    finish_send("k1", "email", "routine", "sent", 0.03, ("m1", "k1", 2**40))
    finish_send("k2", "email", "routine", "sent", 0.2, ("m1", "k2", 2**40))
    finish_send("k3", "email", "routine", "failed", 0.01)
    text = exporter("/metrics")
    found = metrics(text)
    assert found["sluice_notifications_total", (("class", "routine"), ("outcome", "accepted"))] == 2
    assert found["sluice_notifications_total", (("class", "routine"), ("outcome", "folded"))] == 3
    assert found["sluice_sent_total", (("channel", "email"), ("class", "routine"), ("status", "sent"))] == 2
    bucket = ("sluice_send_duration_seconds_bucket", (("channel", "email"), ("class", "routine"), ("le", "0.05")))
    assert found[bucket] == 2
    assert found["sluice_digest_pending_keys", ()] == 1
    for secret in ("987654321", "seeded-user-name", "hunter2-seeded", "entity-seeded-id"):
        assert secret not in text
        assert secret not in exporter("/scaler/routine")


def serve_app(app):
    server = make_server("127.0.0.1", 0, app, server_class=_Server, handler_class=_QuietHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()

    def get(path):
        with urllib.request.urlopen(f"http://127.0.0.1:{server.server_port}{path}", timeout=10) as response:
            return response.read().decode()

    return server, get


def record(redis_client, arrived, send_seconds):
    redis_client.hincrby(keys.counters(), "notifications:routine:accepted", arrived)
    redis_client.hincrby(keys.counters(), processed_field("routine"), arrived)
    redis_client.hincrbyfloat(keys.counters(), "send_duration:push:routine:sum", send_seconds)


def test_the_floor_window_averages_busy_slots_over_its_own_length(redis_client):
    """--floor-window: a minute of ten arrivals a second after nine quiet minutes is 5 busy slots
    over the 2-minute latency window, and about one over a 15-minute floor window."""
    now = time.time()
    sample(120, now=now - 600, retain_s=900)
    record(redis_client, 540, 270.0)  # 0.9 a second for nine minutes, 0.5 s of sending each
    sample(120, now=now - 60, retain_s=900)
    record(redis_client, 600, 300.0)  # then 10 a second for a minute
    sample(120, now=now, retain_s=900)
    both, plain = application(120, 900), application(120)
    for app, busy, floor_window in ((both, 1140 / 600 * 0.5, 900), (plain, 600 / 60 * 0.5, 120)):
        server, get = serve_app(app)
        try:
            payload = json.loads(get("/scaler/routine"))
            assert payload["busy_slots"] == pytest.approx(busy, rel=0.01)
            assert payload["floor_window_seconds"] == floor_window
            assert payload["window_seconds"] == 120
            assert metrics(get("/metrics"))["sluice_busy_slots", (("queue", "routine"),)] == pytest.approx(
                busy, rel=0.01
            )
        finally:
            server.shutdown()
            server.server_close()


def test_samples_are_kept_for_the_floor_window_when_it_is_longer_than_an_hour(redis_client):
    from pipeline.observe.window import points

    now = time.time()
    sample(120, now=now - 5000, retain_s=7200)
    sample(120, now=now, retain_s=7200)
    assert [round(p["t"] - now) for p in points("routine", 7200, now, redis_client)] == [-5000, 0]
    sample(120, now=now + 1)  # the default retention, an hour, drops it
    assert [round(p["t"] - now) for p in points("routine", 7200, now + 1, redis_client)] == [0, 1]


@pytest.mark.parametrize("args", [["--floor-window", "0"], ["--window", "-1"]])
def test_the_exporter_refuses_windows_that_are_not_positive(args):
    from django.core.management import CommandError, call_command

    with pytest.raises(CommandError, match="must be positive"):
        call_command("pipeline_exporter", *args)
