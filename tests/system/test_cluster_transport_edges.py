"""The cluster transport's edges on a real Redis Cluster, through kombu in this process: a fetch read after its
consumer was cancelled goes back to its queue (it was dropped), and an ack of a message restored already is a no-op
(it raised KeyError)."""

import json

import pytest
from kombu import Connection
from kombu.transport.virtual import Message

from pipeline.celery import broker_settings
from pipeline.conf import sluice_settings
from pipeline.connections import get_redis
from pipeline.redis import keys
from tests.cluster_helpers import cluster, queues, use_cluster  # noqa: F401  (the module's cluster)


@pytest.fixture
def channel(settings, cluster, redis_server):
    use_cluster(settings, cluster, redis_server.url, queues(cluster.url, redis_server.url))
    found = broker_settings(sluice_settings().queues["critical"].redis_url)
    connection = Connection(
        found["broker_url"], transport=found["broker_transport"], transport_options=found["broker_transport_options"]
    )
    opened = connection.default_channel
    yield opened
    connection.release()


def partition():
    return sluice_settings().queues["critical"].every_partition[0]


def push(body):
    client = get_redis(sluice_settings().queues["critical"].redis_url)
    delivery = {"exchange": "", "routing_key": partition().name}
    message = {"body": body, "headers": {}, "properties": {"delivery_tag": f"tag-{body}", "delivery_info": delivery}}
    client.lpush(partition().name, json.dumps(message))
    return client


@pytest.mark.timeout(60)
def test_a_fetch_read_after_its_consumer_was_cancelled_goes_back_to_its_queue(channel):
    got = []
    channel.basic_consume(partition().name, False, got.append, "tag-1")
    [child] = channel.children.values()
    client = push("b1")
    channel.connection.cycle._register_BRPOP(child)  # its BLMOVE takes the message into its processing list
    channel.basic_cancel("tag-1")  # then the consumer goes, as Celery cancels it before a close
    with pytest.raises(Exception):  # noqa: B017, PT011  kombu's Empty: nothing was delivered
        child._brpop_read()
    assert got == []
    assert client.llen(partition().name) == 1
    processing = keys.fetch_processing(child.consumer_id, partition().name, child.key_tag)
    assert client.llen(processing) == 0


@pytest.mark.timeout(60)
def test_an_ack_of_a_message_restored_already_is_a_no_op(channel):
    delivered = []
    channel.basic_consume(partition().name, False, delivered.append, "tag-2")
    [child] = channel.children.values()
    push("b2")
    channel.connection.cycle._register_BRPOP(child)
    child._brpop_read()
    [message] = delivered
    assert isinstance(message, Message)
    channel.qos.restore_unacked()  # a lost connection's restore: the message is back in its queue
    client = get_redis(sluice_settings().queues["critical"].redis_url)
    assert client.llen(partition().name) == 1
    message.ack()  # the task ends after that: nothing left to remove, and no error
    assert client.hlen(partition().tag + "unacked") == 0
