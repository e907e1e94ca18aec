"""A fetch whose connection dies before its reply (a primary killed, a failover) may have moved a message into the
consumer's processing list: the consumer puts it back before its next fetch, instead of holding it until it dies.
And a message that is not JSON is dead-lettered, never left in the processing list."""

import pytest

from pipeline.broker import deadletters
from pipeline.redis import keys
from tests.integration.test_transport import consumer, processing_lengths, publish  # noqa: F401 - the fixture
from tests.waiting import wait_for


def fetch_connection_id(client):
    """The id of the connection blocked in the consumer's BLMOVE."""
    found = [c["id"] for c in client.client_list() if c.get("cmd") == "blmove"]
    return found[0] if found else None


@pytest.mark.expected_errors("a fetch lost with its connection")
def test_a_message_moved_by_a_fetch_whose_reply_died_goes_back_to_its_queue(consumer, redis_client):  # noqa: F811
    connection, channel, received = consumer
    with pytest.raises(TimeoutError):
        connection.drain_events(timeout=0.5)  # empty rounds, until the consumer blocks in BLMOVE on critical
    wait_for(lambda: fetch_connection_id(redis_client), 5, what="the fetch blocked in BLMOVE")
    # As if that fetch had moved a message and its reply had died with the connection: the message is in the
    # consumer's processing list (parked on routine first, so the pending BLMOVE cannot take it), and the
    # connection is cut.
    publish(queue="routine")
    redis_client.lmove("routine", keys.fetch_processing(channel.consumer_id, "critical"), "RIGHT", "LEFT")
    redis_client.client_kill_filter(_id=fetch_connection_id(redis_client))
    with pytest.raises(channel.connection_errors):
        connection.drain_events(timeout=5)
    assert "critical" in channel._lost_fetch
    connection.drain_events(timeout=5)  # reconnects, puts the message back, then fetches it
    assert len(received) == 1
    assert processing_lengths(redis_client) == 0
    assert channel._lost_fetch == ()


@pytest.mark.expected_errors("a fetch lost with its connection")
def test_after_any_reconnection_a_stray_in_the_processing_list_goes_back(consumer, redis_client):  # noqa: F811
    # However the fetch connection was lost (here cut while no fetch was pending: the record of a delivery, or the
    # event loop, met the error), its reconnection makes the consumer put back what its processing lists hold.
    connection, channel, received = consumer
    publish()
    connection.drain_events(timeout=5)
    assert len(received) == 1
    publish(queue="routine")
    redis_client.lmove("routine", keys.fetch_processing(channel.consumer_id, "critical"), "RIGHT", "LEFT")
    channel.client.connection.disconnect()  # the next fetch reconnects
    for _ in range(4):  # the round after the reconnection puts it back; a later one fetches it
        try:
            connection.drain_events(timeout=2)
        except TimeoutError:
            continue
        if len(received) == 2:
            break
    assert len(received) == 2
    assert processing_lengths(redis_client) == 0


@pytest.mark.expected_errors("is not valid JSON: dead-lettered")
def test_a_message_that_is_not_json_is_dead_lettered_and_leaves_nothing_held(consumer, redis_client):  # noqa: F811
    connection, _channel, received = consumer
    redis_client.lpush("critical", b"\xff not json")
    with pytest.raises(TimeoutError):
        connection.drain_events(timeout=1)
    assert received == []
    assert (redis_client.llen("critical"), processing_lengths(redis_client)) == (0, 0)
    [letter] = deadletters.entries(reason="undecodable")
    assert "not json" in letter.kwargs["raw"]
