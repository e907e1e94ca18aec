"""The reaper scales with dead consumers: one scan gives back what every dead one held, holders first, in bounded
steps; an idle batch consumer is not registered at all; a check fails when a redelivery could outlive its mark."""

import pytest
from django.core.checks import run_checks

from pipeline.broker import batch_fetch as fetch
from pipeline.broker import marks, reaper
from pipeline.celery import app
from pipeline.redis import keys
from tests.integration.test_batches import enqueue

QUEUE = "background"


def dead_consumer(client, name, held, tags=0):
    """Register a consumer that died holding ``held`` messages in its processing list (and ``tags`` delivery tags),
    as a fetch or a batch leaves it: registered, sources noted, no heartbeat."""
    client.sadd(keys.fetch_consumers(), name)
    client.sadd(keys.fetch_sources(name), QUEUE)
    for n in range(held):
        client.lpush(keys.fetch_processing(name, QUEUE), f"{name}-m{n}")
    for n in range(tags):
        client.sadd(keys.fetch_tags(name), f"{name}-t{n}")


@pytest.mark.timeout(30)
def test_one_scan_gives_back_every_dead_consumer_holding_messages(redis_client, monkeypatch):
    # 25 dead consumers holding messages among 60 dead empty ones: the old reaper took 10 a scan, empty ones too.
    for n in range(60):
        dead_consumer(redis_client, f"empty-{n:02d}", 0)
    for n in range(25):
        dead_consumer(redis_client, f"pod-{n:02d}", 7)
    # One step moves at most 3 messages: a consumer holding 7 takes three steps, and no call runs unbounded.
    monkeypatch.setattr(reaper, "STEP", 3)
    calls = []
    script = reaper._script

    def counting(client):
        run = script(client)

        def call(keys, args):
            calls.append(args[0])
            return run(keys=keys, args=args)

        return call

    monkeypatch.setattr(reaper, "_script", counting)
    with app.connection_for_read() as connection:
        channel = connection.channel()
        channel.housekeeping(force=True)
        channel.close()
    assert redis_client.llen(QUEUE) == 25 * 7
    assert not [k for k in redis_client.scan_iter(f"{keys.fetch_prefix()}*:processing:*")]
    assert redis_client.scard(keys.fetch_consumers()) == 0
    # Those holding messages went first, each in ceil(7 / 3) = 3 steps; then one step for each empty one.
    holders = [c for c in calls if c.startswith("pod-")]
    assert len(holders) == 25 * 3
    assert calls[: len(holders)] == holders


@pytest.mark.timeout(30)
def test_a_live_consumer_is_left_alone_and_a_stalled_one_that_came_back_too(redis_client):
    dead_consumer(redis_client, "stalled", 4)
    found = reaper.dead_consumers(redis_client)
    assert [(d.consumer, d.held) for d in found] == [("stalled", 4)]
    redis_client.set(keys.fetch_alive("stalled"), 1, px=60_000)  # its heartbeat came back meanwhile
    assert reaper.reap(redis_client, found[0], restore_tag=lambda tag: None) is False
    assert redis_client.llen(keys.fetch_processing("stalled", QUEUE)) == 4
    assert redis_client.sismember(keys.fetch_consumers(), "stalled")


@pytest.mark.timeout(30)
def test_tags_of_a_dead_fetch_consumer_are_restored(redis_client, monkeypatch):
    monkeypatch.setattr(reaper, "STEP", 2)
    dead_consumer(redis_client, "fetcher", 1, tags=5)
    restored = []
    [dead] = reaper.scan(redis_client, 60, restored.append)
    assert sorted(restored) == [f"fetcher-t{n}" for n in range(5)]
    assert dead.moved == 1
    assert not redis_client.exists(keys.fetch_tags("fetcher"), keys.fetch_sources("fetcher"))


@pytest.mark.timeout(30)
def test_a_second_scan_within_the_interval_does_nothing(redis_client):
    dead_consumer(redis_client, "a", 1)
    assert len(reaper.scan(redis_client, 60, lambda tag: None)) == 1
    dead_consumer(redis_client, "b", 1)
    assert reaper.scan(redis_client, 60, lambda tag: None) == []  # the lock: one scan a quarter of 60 s
    assert redis_client.pttl(keys.fetch_reaper_lock()) <= 60_000 / 4 * reaper.LOCK_SHARE


@pytest.mark.timeout(30)
def test_a_batch_consumer_is_registered_only_while_it_holds_messages(redis_client):
    consumer = fetch.BatchConsumer()
    assert consumer.take(QUEUE, 10) == []
    # Took nothing: not in the registry, no heartbeat, nothing for a reaper to look at.
    assert not redis_client.sismember(keys.fetch_consumers(), consumer.id)
    assert not redis_client.exists(keys.fetch_alive(consumer.id), keys.fetch_sources(consumer.id))
    enqueue(redis_client, 5, queue=QUEUE)
    taken = consumer.take(QUEUE, 10)
    assert len(taken) == 5
    assert redis_client.sismember(keys.fetch_consumers(), consumer.id)
    assert redis_client.pttl(keys.fetch_alive(consumer.id)) > 0
    consumer.ack(taken[:3])
    assert consumer.give_back(taken[3:]) == 2
    consumer.release()
    assert not redis_client.sismember(keys.fetch_consumers(), consumer.id)
    assert not [k for k in redis_client.scan_iter(f"{keys.fetch_prefix()}{consumer.id}*")]
    assert redis_client.llen(QUEUE) == 2


@pytest.mark.timeout(30)
def test_release_gives_back_what_a_batch_still_held(redis_client):
    consumer = fetch.BatchConsumer()
    enqueue(redis_client, 4, queue=QUEUE)
    assert len(consumer.take(QUEUE, 10)) == 4
    consumer.release()
    assert redis_client.llen(QUEUE) == 4
    assert redis_client.scard(keys.fetch_consumers()) == 0


@pytest.mark.timeout(30)
def test_a_redelivery_that_could_outlive_its_mark_fails_the_check(monkeypatch, settings):
    assert not [e for e in run_checks() if e.id == "sluice.E007"]
    assert marks.redelivery_bound_s() == marks.lifetime_s() == 700
    options = {"visibility_timeout": 7200}
    settings.SLUICE_CELERY = {"broker_transport_options": options}
    [error] = [e for e in run_checks() if e.id == "sluice.E007"]
    assert "visibility_timeout 7200 s" in error.msg
    assert "3600 s" in error.msg
    assert "visibility_timeout" in error.hint
    assert marks.lifetime_s() == marks.MAX_LIFETIME_S  # the marks stay bounded; the check says what that costs
    # A slow reaper alone does it too.
    options = {**options, "visibility_timeout": 300, "fetch_dead_after_s": 3000}
    settings.SLUICE_CELERY = {"broker_transport_options": options}
    [error] = [e for e in run_checks() if e.id == "sluice.E007"]
    assert "reaper 3752 s" in error.msg
