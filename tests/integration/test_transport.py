"""The transport's reliable fetch: a message is always in one place (queue, a consumer's processing list, or
kombu's unacked record), a dead consumer's messages come back, and a worker's failures are loud."""

import inspect
import sys
import time

import kombu
import pytest
from kombu.transport import redis as kombu_redis

from pipeline.broker import transport
from pipeline.celery import app
from pipeline.redis import keys
from sluice_tools import fetch_hook
from sluice_tools.processes import ManagedProcess

RECORDER = {name: {"backend": "sluice_tools.bench.provider.SimulatedProvider"} for name in ("email", "sms", "push")}


def processing_lengths(client):
    return sum(client.llen(key) for key in client.scan_iter(f"{keys.fetch_prefix()}*:processing:*"))


def publish(queue="critical", **options):
    app.send_task("sluice.send.critical", kwargs={"notification_id": "n"}, queue=queue, **options)


@pytest.fixture
def consumer(redis_client):
    """A kombu channel of Sluice's transport consuming ``critical``, and what it received."""
    connection = app.connection_for_read()
    channel = connection.channel()
    received = []
    channel.basic_consume("critical", no_ack=False, callback=received.append, consumer_tag="test")
    yield connection, channel, received
    channel.close()
    connection.release()


def test_a_fetched_message_is_in_one_place_at_every_step(consumer, redis_client, monkeypatch):
    connection, channel, received = consumer
    seen = {}

    def between_fetch_and_record(source):
        seen.update(
            queue=redis_client.llen("critical"),
            processing=processing_lengths(redis_client),
            unacked=redis_client.hlen("unacked"),
        )

    monkeypatch.setattr(transport.Channel, "_deliver_fetched", fetch_hook.hooked(between_fetch_and_record))
    publish()
    connection.drain_events(timeout=5)
    assert seen == {"queue": 0, "processing": 1, "unacked": 0}
    [message] = received
    assert (redis_client.hlen("unacked"), processing_lengths(redis_client)) == (1, 0)
    tags = keys.fetch_tags(channel.consumer_id)
    assert redis_client.smembers(tags) == {message.delivery_tag.encode()}
    message.ack()
    assert (redis_client.hlen("unacked"), redis_client.scard(tags)) == (0, 0)


def test_a_message_on_a_priority_sub_list_is_fetched_too(consumer, redis_client):
    connection, _channel, received = consumer
    publish(priority=5)
    assert redis_client.llen("critical") == 0  # it went to a sub-list
    connection.drain_events(timeout=5)
    assert len(received) == 1
    publish()
    for _ in range(3):  # an empty fetch_any round, then the blocking one on the first list
        try:
            connection.drain_events(timeout=2)
        except TimeoutError:
            continue
        break
    assert len(received) == 2


def test_a_dead_consumers_messages_come_back_at_once(consumer, redis_client):
    connection, channel, _received = consumer
    publish()
    connection.drain_events(timeout=5)
    assert redis_client.hlen("unacked") == 1
    # The consumer dies holding that message, and with another moved into its processing list by a BLMOVE
    # that Redis answered on its dead socket.
    stranded = b'{"body": "", "headers": {}, "properties": {}}'
    redis_client.lpush(keys.fetch_processing(channel.consumer_id, "critical"), stranded)
    redis_client.delete(keys.fetch_alive(channel.consumer_id), keys.fetch_reaper_lock())

    with app.connection_for_read() as other:
        reaper = other.channel()
        reaper.housekeeping(force=True)
        reaper.close()
    assert redis_client.llen("critical") == 2
    # Workers take from the right: the message fetched first goes first, then the one fetched after it.
    assert redis_client.lindex("critical", 0) == stranded
    assert redis_client.hlen("unacked") == 0
    assert not redis_client.sismember(keys.fetch_consumers(), channel.consumer_id)
    assert not redis_client.exists(keys.fetch_sources(channel.consumer_id), keys.fetch_tags(channel.consumer_id))


def test_a_consumer_forgotten_while_alive_registers_again_before_its_next_fetch(consumer, redis_client):
    # A reaper took a stalled consumer for dead and forgot it. Its next fetch must register it again, in the same
    # write, or a message moved into its processing list would belong to nobody once the consumer really died.
    connection, channel, received = consumer
    try:
        connection.drain_events(timeout=0.3)
    except TimeoutError:
        pass
    # A stalled consumer's pending BLMOVE times out on the server (brpop_timeout, 1 s) long before its heartbeat
    # does (fetch_dead_after_s): by the time a reaper may forget it, nothing can move into its processing list.
    time.sleep(1.5)
    redis_client.delete(keys.fetch_alive(channel.consumer_id), keys.fetch_reaper_lock())
    with app.connection_for_read() as other:
        reaper = other.channel()
        reaper.housekeeping(force=True)
        reaper.close()
    assert not redis_client.sismember(keys.fetch_consumers(), channel.consumer_id)
    publish()
    connection.drain_events(timeout=5)
    assert len(received) == 1
    assert redis_client.sismember(keys.fetch_consumers(), channel.consumer_id)
    assert redis_client.pttl(keys.fetch_alive(channel.consumer_id)) > 0
    assert redis_client.smembers(keys.fetch_sources(channel.consumer_id)) == {
        b"critical",
        *(f"critical\x06\x16{step}".encode() for step in (3, 6, 9)),
    }


def test_a_clean_close_leaves_nothing_registered(redis_client):
    with app.connection_for_read() as connection:
        channel = connection.channel()
        channel.basic_consume("critical", no_ack=False, callback=lambda m: None, consumer_tag="t")
        try:
            connection.drain_events(timeout=0.5)
        except TimeoutError:
            pass
        assert redis_client.scard(keys.fetch_consumers()) == 1
        assert redis_client.pttl(keys.fetch_alive(channel.consumer_id)) > 0
        channel.close()
    assert redis_client.scard(keys.fetch_consumers()) == 0
    assert not [k for k in redis_client.scan_iter(f"{keys.fetch_prefix()}*") if k != keys.fetch_reaper_lock().encode()]


def test_a_collected_connection_is_a_connection_error_not_an_attribute_error(redis_client):
    connection = app.connection_for_read()
    channel = connection.channel()
    channel.basic_consume("critical", no_ack=False, callback=lambda message: None, consumer_tag="t")
    publish()
    connection.drain_events(timeout=5)
    # What kombu 5.7's Connection.collect() leaves behind after a connection error: pools gone, and the
    # transport without its client. Restoring the unacked message then had to build a new client.
    channel._disconnect_pools()
    connection.transport.client = None
    with pytest.raises(connection.connection_errors):
        channel.qos.restore_unacked_once()
    assert redis_client.hlen("unacked") == 1  # not lost: the reaper or the visibility timeout brings it back


def test_kombu_is_the_version_the_fetch_was_written_for():
    assert kombu.__version__ == transport.TESTED_KOMBU
    overridden = ("_brpop_start", "_brpop_read", "_connparams", "_put", "close")
    for name in overridden:
        assert inspect.isfunction(getattr(kombu_redis.Channel, name)), name
    assert inspect.isfunction(kombu_redis.QoS.append)
    assert inspect.isfunction(kombu_redis.QoS._remove_from_indices)


def blocked_in_fetch(client):
    """Whether a client is blocked in a fetch right now (BLMOVE, or kombu's BRPOP)."""
    return any("b" in c["flags"] and c["cmd"] in ("blmove", "brpop") for c in client.client_list())


def crashing_worker(redis_url, plain_celery):
    command = (
        "['celery', '-A', 'pipeline', 'worker', '-Q', 'critical']"
        if plain_celery
        else "['manage.py', 'worker', 'critical']"
    )
    main = (
        "from celery.__main__ import main; main()"
        if plain_celery
        else "import runpy; runpy.run_path('manage.py', run_name='__main__')"
    )
    code = (
        "import sys; import tests.hooks as hooks; hooks.crash_on_deliver(); "
        f"sys.argv = {command} + ['-c', '1', '--loglevel=INFO', '--without-mingle', '--without-gossip']; {main}"
    )
    name = "celery-worker-crash" if plain_celery else "worker-crash"
    return ManagedProcess(name, [sys.executable, "-c", code], env={"REDIS_URL": redis_url}, ready_text=" ready.")
