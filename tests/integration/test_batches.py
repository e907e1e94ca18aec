"""Batches of routine and background sends: each message keeps its own claim, gate, retry, dead letter and metrics;
a critical send passes a batch; a worker killed mid-batch loses nothing."""

import json
import time

import pytest
from celery.contrib.testing.worker import start_worker
from django.core.exceptions import ImproperlyConfigured

from notifications.channels import locmem
from notifications.channels.base import BaseChannel, PermanentSendError, TransientSendError
from pipeline.broker import batch_fetch as fetch
from pipeline.broker import deadletters, marks
from pipeline.broker.message import envelope
from pipeline.celery import app
from pipeline.conf import sluice_settings
from pipeline.metrics import read_counters
from pipeline.redis import keys
from pipeline.sending import engine
from tests import scripted
from tests.waiting import settled, wait_for

LOCMEM = "notifications.channels.locmem.LocmemChannel"
SCRIPTED = "tests.scripted.ScriptedChannel"
KIND = "board.updated"  # background, on push


def enqueue(redis_client, count, kind=KIND, queue="background", prefix="n"):
    """Push ``count`` send messages straight onto ``queue`` (no worker runs yet), oldest first; return their ids."""
    ids = [f"{prefix}{i:04d}" for i in range(count)]
    for nid in ids:
        kwargs = {"notification_id": nid, "kind": kind, "user_id": 1, "entity_id": nid, "payload": {}}
        redis_client.lpush(queue, envelope(f"sluice.send.{queue}", nid, json.dumps(kwargs), queue, "{}"))
    return ids


@pytest.fixture
def worker_on(redis_client, settings, monkeypatch):
    """Start an in-process worker (threads) on some queues, once the test has queued its messages."""
    monkeypatch.setattr("pipeline.sending.endings.MAX_BACKOFF_S", 0)
    locmem.clear()
    scripted.reset()

    def start(queues=("background",), concurrency=1):
        return start_worker(
            app,
            pool="threads",
            concurrency=concurrency,
            perform_ping_check=False,
            queues=list(queues),
            loglevel="WARNING",
            shutdown_timeout=30,
        )

    yield start
    locmem.clear()
    scripted.reset()


def _id_of(raw):
    try:
        return json.loads(raw)["headers"]["id"]
    except (ValueError, KeyError, TypeError):
        return raw[:60]


def where_the_messages_are(redis_client):
    """What a failed wait prints: the outbox, every list in Redis with its messages' ids, and the worker's requests."""
    from celery.worker import state

    lists = {}
    for key in redis_client.scan_iter():
        if redis_client.type(key) == b"list":
            lists[key.decode(errors="replace")] = [_id_of(raw) for raw in redis_client.lrange(key, 0, -1)]
    requests = {
        name: sorted(r.id for r in group)
        for name, group in (("active", state.active_requests), ("reserved", state.reserved_requests))
    }
    return f"outbox {[m.id for m in locmem.outbox]}, lists {lists}, worker {requests}"


def channels(settings, backend, gate=None):
    settings.SLUICE_CHANNELS = {
        name: {"backend": backend, **(gate if gate and name == "push" else {})} for name in ("email", "sms", "push")
    }


@pytest.mark.timeout(60)
def test_a_batch_sends_each_message_once_in_one_bulk_call_with_its_own_claim(worker_on, settings, redis_client):
    channels(settings, LOCMEM)
    settings.SLUICE_QUEUES = {"background": {"batch": 1000}}
    ids = enqueue(redis_client, 40)
    with worker_on():
        wait_for(lambda: len(locmem.outbox) >= 40)
        wait_for(lambda: settled("background"), what="the batch acked")
    assert sorted(m.id for m in locmem.outbox) == ids
    # The task's own message took the 39 others: one provider call for all of them, in queue order.
    assert locmem.bulk_calls == [ids]
    # Each one's own "sent" mark, in the hash of its time bucket (pipeline.broker.marks), and no claim left behind.
    for nid in ids:
        mark = marks.field(nid, "push")
        assert any(redis_client.hget(key, mark) for key in marks.candidates(mark))
        assert not redis_client.exists(keys.sent(nid, "push"))
    counters = read_counters(redis_client)
    assert counters["processed:background"] == 40
    assert counters["sent:push:background:sent"] == 40
    assert redis_client.llen("background") == 0
    assert not redis_client.keys(keys.fetch_prefix() + "*:processing:*")


@pytest.mark.timeout(60)
def test_the_batch_size_is_the_setting(worker_on, settings, redis_client):
    channels(settings, LOCMEM)
    settings.SLUICE_QUEUES = {"background": {"batch": 7}}
    ids = enqueue(redis_client, 20)
    with worker_on():
        wait_for(lambda: len(locmem.outbox) >= 20)
    assert sorted(m.id for m in locmem.outbox) == ids
    assert [len(call) for call in locmem.bulk_calls] == [7, 7, 6]


@pytest.mark.timeout(60)
def test_a_backend_without_send_many_falls_back_to_single_sends(worker_on, settings, redis_client):
    channels(settings, SCRIPTED)
    ids = enqueue(redis_client, 25)
    with worker_on():
        wait_for(lambda: len(scripted.sent) >= 25)
    assert [nid for nid, _channel in scripted.sent] == ids
    assert read_counters(redis_client)["sent:push:background:sent"] == 25


@pytest.mark.timeout(60)
def test_a_transient_failure_retries_only_that_message(worker_on, settings, redis_client):
    channels(settings, SCRIPTED)
    scripted.plan["push"] = ["ok", "ok", "transient"]
    ids = enqueue(redis_client, 10)
    with worker_on():
        wait_for(lambda: len(scripted.sent) >= 10)
        wait_for(lambda: settled("background"), what="the batch and its retry acked")
    sent = [nid for nid, _channel in scripted.sent]
    assert sorted(sent) == ids  # each once: the other nine were not sent again
    assert sent[-1] == ids[2]  # the one that failed went out on its retry
    counters = read_counters(redis_client)
    assert counters["sent:push:background:failed"] == 1
    assert counters["sent:push:background:sent"] == 10
    assert counters.get("sent:push:background:duplicate", 0) == 0
    assert deadletters.size() == 0


@pytest.mark.timeout(60)
def test_a_permanent_failure_dead_letters_only_that_message(worker_on, settings, redis_client):
    channels(settings, SCRIPTED)
    scripted.plan["push"] = ["ok", "permanent"]
    ids = enqueue(redis_client, 10)
    with worker_on():
        wait_for(lambda: len(scripted.sent) >= 9 and deadletters.size() >= 1)
        wait_for(lambda: settled("background"), what="the batch acked")
    assert sorted(nid for nid, _channel in scripted.sent) == ids[:1] + ids[2:]
    letters = deadletters.entries()
    assert [(letter.notification_id, letter.reason) for letter in letters] == [(ids[1], "permanent")]
    assert read_counters(redis_client)["sent:push:background:rejected"] == 1
    assert redis_client.llen("background") == 0


class SlowChannel(BaseChannel):
    """Records when each push send starts, in order, and takes 0.15 s (a bulk call too: it has no send_many)."""

    sent = []

    def send(self, message):
        if self.name == "push":
            SlowChannel.sent.append((message.id, time.monotonic()))
        time.sleep(0.15)  # the send's own duration: the test is about what passes while a batch sends


@pytest.mark.timeout(90)
def test_a_critical_send_passes_the_messages_a_batch_has_not_started(worker_on, settings, redis_client, monkeypatch):
    # One send at a time on push: a batch sends message by message, asking the gate before each one.
    channels(settings, "tests.integration.test_batches.SlowChannel", gate={"concurrency": 1, "hold_ms": 300})
    SlowChannel.sent = []
    given_back, critical_started = [], []
    real_give_back, real_admit = fetch.BatchConsumer.give_back, engine.Batch.claim

    def spy_give_back(self, messages):
        given_back.append(len(messages))
        return real_give_back(self, messages)

    def spy_admit(self, index, message):
        if message.klass == "critical" and message.channel == "push":
            critical_started.append(time.monotonic())  # the critical send is at its gate
        return real_admit(self, index, message)

    monkeypatch.setattr(fetch.BatchConsumer, "give_back", spy_give_back)
    monkeypatch.setattr(engine.Batch, "claim", spy_admit)
    ids = enqueue(redis_client, 20)
    with worker_on(queues=("critical", "background"), concurrency=2):
        wait_for(lambda: len(SlowChannel.sent) >= 3)
        enqueue(redis_client, 1, kind="meeting.reminder", queue="critical", prefix="crit")
        wait_for(lambda: len(SlowChannel.sent) >= 21, timeout=30)
    order = [nid for nid, _at in SlowChannel.sent]
    assert sorted(nid for nid in order if nid != "crit0000") == ids
    at_gate = critical_started[0]
    sent_at = dict(SlowChannel.sent)["crit0000"]
    passed = [nid for nid, at in SlowChannel.sent if at_gate < at < sent_at]
    # Once the critical send waits at the gate, no background send starts before it.
    assert passed == [], order
    assert given_back  # the batch gave back what it had not started
    assert given_back[0] > 5


@pytest.mark.timeout(30)
def test_a_message_the_batch_must_not_take_goes_back_to_the_queue(worker_on, settings, redis_client):
    channels(settings, LOCMEM)
    ids = enqueue(redis_client, 3)
    # A retry due in an hour: the batch leaves it to a worker, which holds it until it is due.
    kwargs = {"notification_id": "later", "kind": KIND, "user_id": 1, "entity_id": "later", "payload": {}}
    later = envelope("sluice.send.background", "later", json.dumps(kwargs), "background", "{}", eta=time.time() + 3600)
    redis_client.lpush("background", later)
    with worker_on():
        wait_for(lambda: len(locmem.outbox) >= 3, what=lambda: f"three sent: {where_the_messages_are(redis_client)}")
        batch_lists = keys.fetch_prefix() + "*batch-*:processing:*"
        wait_for(
            lambda: not any(redis_client.llen(key) for key in redis_client.keys(batch_lists)),
            what="the batch's processing list emptied (the later message given back)",
        )
        assert sorted(m.id for m in locmem.outbox) == ids


def test_critical_batches_are_refused_and_sizes_are_checked(settings):
    settings.SLUICE_QUEUES = {"critical": {"batch": 5}}
    with pytest.raises(ImproperlyConfigured, match=r"SLUICE_QUEUES\['critical'\]\['batch'\] must be 1"):
        sluice_settings()
    settings.SLUICE_QUEUES = {"background": {"batch": 0}}
    with pytest.raises(ImproperlyConfigured, match=r"SLUICE_QUEUES\['background'\]\['batch'\] must be an integer"):
        sluice_settings()
    settings.SLUICE_QUEUES = {"routine": {"batch": 20_000}}
    with pytest.raises(ImproperlyConfigured, match=r"SLUICE_QUEUES\['routine'\]\['batch'\] must be at most"):
        sluice_settings()
    settings.SLUICE_QUEUES = {}
    queues = sluice_settings().queues
    assert (queues["critical"].batch, queues["routine"].batch, queues["background"].batch) == (1, 50, 200)


@pytest.mark.timeout(30)
@pytest.mark.parametrize("partitioned", [False, True])
def test_critical_active_sees_a_waiting_critical_and_the_hold_window(redis_client, settings, partitioned):
    from pipeline.gates import gate

    limits = {"partition_by": "brand", "partition_rate_per_s": 1, "rate_per_s": 1} if partitioned else {}
    channels(settings, LOCMEM, gate={"rate_per_s": 1, "burst": 1, "hold_ms": 300, **limits})
    payload = {"brand": "acme"}
    assert not fetch.critical_active("push", payload)
    with gate.slot("push", "critical", payload):
        pass
    assert fetch.critical_active("push", payload)  # the hold window after a critical send
    time.sleep(0.35)  # the 300 ms hold window runs out: the test is about that window
    assert not fetch.critical_active("push", payload)
    with pytest.raises(gate.GateTimeout):
        with gate.slot("push", "critical", payload, max_wait_s=0):  # no token: it waits (registered as waiting)
            pass
    assert fetch.critical_active("push", payload)
    assert not fetch.critical_active("email")  # no gate on email


@pytest.mark.timeout(60)
def test_a_batch_takes_no_more_than_its_share_of_the_ceiling_margin(worker_on, settings, redis_client):
    # Capacity 40, ceiling 56: 16 messages of margin for the 8 slots of background's profile, 2 each.
    channels(settings, LOCMEM)
    settings.SLUICE_QUEUES = {"background": {"capacity": 40, "ceiling": 56, "batch": 1000}}
    ids = enqueue(redis_client, 9)
    with worker_on():
        wait_for(lambda: len(locmem.outbox) >= 9)
    assert sorted(m.id for m in locmem.outbox) == ids
    assert [len(call) for call in locmem.bulk_calls] == [3, 3, 3]


@pytest.mark.timeout(30)
def test_a_consumer_that_could_not_end_its_batch_is_retired(redis_client):
    from redis.exceptions import ConnectionError as RedisConnectionError

    from pipeline.sending.send_task import end_or_retire

    current = fetch.consumer()

    def end(consumer, items):
        raise RedisConnectionError("Redis went away")

    with pytest.raises(RedisConnectionError):
        end_or_retire(current, end, [])
    # The next batch of this thread takes under a new identity; the old one's heartbeat lapses, and a reaper
    # puts back what it still holds.
    assert fetch.consumer() is not current


@pytest.mark.timeout(60)
def test_a_bulk_call_carries_no_more_than_the_gates_burst(worker_on, settings, redis_client):
    # A rate-limited channel: a call never sends more at one instant than the token bucket holds.
    channels(settings, LOCMEM, gate={"rate_per_s": 1000, "burst": 5})
    ids = enqueue(redis_client, 12)
    with worker_on():
        wait_for(lambda: len(locmem.outbox) >= 12)
    assert sorted(m.id for m in locmem.outbox) == ids
    assert max(len(call) for call in locmem.bulk_calls) <= 5
    assert sum(len(call) for call in locmem.bulk_calls) == 12


class BulkProvider(BaseChannel):
    """A provider with a bulk call: ids in ``options["down_for"]`` fail transiently, in ``"refuse"`` permanently."""

    calls = []

    def send(self, message):
        raise AssertionError("a bulk provider is called in bulk")

    def send_many(self, messages):
        BulkProvider.calls.append((self.provider, [m.id for m in messages]))
        results = []
        for m in messages:
            if m.id in self.options.get("refuse", ()):
                results.append(PermanentSendError("bad recipient"))
            elif m.id in self.options.get("down_for", ()):
                results.append(TransientSendError("try later"))
            else:
                results.append(f"{self.provider}-{m.id}")
        return results


@pytest.mark.django_db
@pytest.mark.timeout(30)
def test_bulk_failover_moves_only_the_messages_that_failed(redis_client, settings):
    from notifications.channels.base import Message
    from notifications.delivery import failover

    backend = "tests.integration.test_batches.BulkProvider"
    settings.SLUICE_CHANNELS = {
        "push": {
            "providers": [
                {"name": "a", "backend": backend, "options": {"down_for": ["m1", "m3"], "refuse": ["m2"]}},
                {"name": "b", "backend": backend, "options": {"down_for": ["m3"]}},
            ]
        },
        "email": {"backend": LOCMEM},
        "sms": {"backend": LOCMEM},
    }
    BulkProvider.calls = []
    messages = [Message(f"m{i}", "push", KIND, "background", 1, f"e{i}", "s", "b") for i in range(4)]
    results = failover.send(messages, sluice_settings().channels["push"], bulk=True)
    assert BulkProvider.calls == [("a", ["m0", "m1", "m2", "m3"]), ("b", ["m1", "m3"])]
    assert results[0] == ("a", "a-m0")
    assert results[1] == ("b", "b-m1")
    assert isinstance(results[2], PermanentSendError)
    assert isinstance(results[3], TransientSendError)
    assert "a: TransientSendError" in str(results[3])
    assert "b: TransientSendError" in str(results[3])
