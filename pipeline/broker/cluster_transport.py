"""Sluice's transport for a class on a Redis Cluster: the class's channel, and under it one fetching channel per
partition.

A partition is a keyspace of one Redis in all but name (pipeline.redis.cluster): its queue, its priority lists, the
reliable fetch's processing lists, heartbeats and registry, and kombu's unacked record all start with its hash tag,
so they live on one slot. A worker's channel for the class (the one Celery consumes on) publishes, binds and answers
remote control through the cluster; for each partition it consumes, it opens a PartitionChannel, which is the
single-Redis channel of pipeline/broker/transport.py pointed at the primary that serves that slot: its own blocking
fetch (BLMOVE, so a critical message is picked up as fast as on one Redis), heartbeat, reaper and record. Messages are
delivered to the class's consumer, under its prefetch; an ack goes to the partition that holds the message.

A partition's slot that moved (a reshard, a shard's failover) answers MOVED: the fetch connection is then given up as
lost, and the worker reconnects to the primary the cluster names now; acks and the reaper follow it by themselves
(SlotClient). What a fetch had moved is given back as after any lost connection.
"""

from functools import cached_property
from queue import Empty

import redis
from kombu.transport.virtual import QoS as VirtualQoS
from kombu.utils.json import dumps
from redis import exceptions as redis_errors

from pipeline.broker import transport
from pipeline.connections import get_redis, lua_source
from pipeline.connections import script as engine_scripts
from pipeline.redis import addresses, keys
from pipeline.redis.cluster import MOVING, SlotClient

#: What Redis answers a client blocked on a key when its node stops being a primary (a shard's failover).
UNBLOCKED = "UNBLOCKED"
#: The hash tag of kombu's exchange tables on a cluster.
BINDINGS_TAG = "{sluice.bindings}"


class PartitionQoS(transport.QoS):
    """A partition channel's record of what it fetched (kombu's unacked hash and index, on the partition's slot); it
    consumes as far as its class's channel allows (that channel's prefetch)."""

    def can_consume(self):
        return self.channel.parent.qos.can_consume()

    def can_consume_max_estimate(self):
        return self.channel.parent.qos.can_consume_max_estimate()

    def settle(self, delivery_tag, requeue):
        """Forget ``delivery_tag``'s record, or put its message back at the head of its queue (``requeue``)."""
        if requeue:
            self.restore_by_tag(delivery_tag, leftmost=True)
        else:
            self.channel.slot.run(lambda client: self._remove_from_indices(delivery_tag, client.pipeline()).execute())


class ClusterQoS(transport.QoS):
    """The class channel's QoS: it counts what its consumer holds (the prefetch), and hands each ack, reject and
    restore to the partition channel that fetched the message."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._holders = {}

    def held(self, delivery_tag, holder):
        self._holders[delivery_tag] = holder

    def ack(self, delivery_tag):
        self._settle(delivery_tag, requeue=False)

    def reject(self, delivery_tag, requeue=False):
        self._settle(delivery_tag, requeue)

    def _settle(self, delivery_tag, requeue):
        holder = self._holders.pop(delivery_tag, None)
        # None: restored already when its connection was lost (restore_unacked), the task ending after that; as on
        # one Redis, its ack then has nothing left to remove (the copy put back is delivered again, and its send's
        # marks tell it was sent).
        if holder is not None:
            holder.qos.settle(delivery_tag, requeue)
        VirtualQoS.ack(self, delivery_tag)

    def restore_unacked(self, client=None):
        for delivery_tag in list(self._delivered):
            holder = self._holders.pop(delivery_tag, None)
            if holder is not None:
                holder.qos.restore_by_tag(delivery_tag)
        self._delivered.clear()

    def restore_visible(self, *args, **kwargs):
        """Each partition channel restores its own partition's overdue messages."""


class PartitionChannel(transport.Channel):
    """The reliable fetch of one partition, on the primary that serves its slot: its fetch connection is a plain
    client of that node, everything else a SlotClient that follows the slot."""

    QoS = PartitionQoS

    def __init__(self, connection, parent, tag, queues):
        self.parent = parent
        self.key_tag = tag
        self.slot = SlotClient(parent.cluster, tag)
        super().__init__(connection)
        for name in ("unacked_key", "unacked_index_key", "unacked_mutex_key"):
            setattr(self, name, tag + getattr(parent, name))
        if not all(queue.startswith(tag) for queue in queues):
            # A queue outside the partitions (a reply queue): its priority sub-lists would each be in a slot of
            # their own, and nothing Sluice or Celery sends there has a priority.
            self.priority_steps = [0]
        self._active_queues = list(queues)
        self._update_queue_cycle()

    @property
    def fetch_owner(self):
        return self.parent

    def _connparams(self, asynchronous=False):
        params = super()._connparams(asynchronous)
        node = self.parent.cluster.nodes_manager.get_node_from_slot(self.slot.slot)
        params.update(host=node.host, port=node.port, db=0)
        return params

    def _create_client(self, asynchronous=False):
        # The asynchronous client is the fetch connection the event loop polls; the rest follows the slot.
        return super()._create_client(asynchronous=True) if asynchronous else self.slot

    def scripts(self, client):
        cache = self.__dict__.setdefault("_scripts", {})
        if not cache:
            cache.update(
                {name: self.slot.register_script(lua_source(engine_scripts.path(name))) for name in transport.SCRIPTS}
            )
        return cache

    def housekeeping(self, lists=None, force=False):
        try:
            super().housekeeping(lists, force)
        except MOVING:
            self.slot.refresh()  # the next round finds the slot where it went

    def _lookup(self, exchange, routing_key, default=None):
        # A message goes back to its own partition's queue, never through the exchange (whose bindings live elsewhere).
        return [routing_key if routing_key in self._active_queues else self._active_queues[0]]

    def _deliver_fetched(self, source, raw):
        if source.rsplit(self.sep, 1)[0] not in self.connection._callbacks:
            # The class's channel cancelled its consumer before closing this one, whose close reads the fetch still
            # pending: kombu would find no consumer (and no channel to reject it through), and the fetch would take
            # the message for handled and drop it from the processing list. It goes back to its queue instead.
            processing = keys.fetch_processing(self.consumer_id, source, self.key_tag)
            self.slot.run(lambda client: client.pipeline().lrem(processing, -1, raw).rpush(source, raw).execute())
            raise Empty()
        return super()._deliver_fetched(source, raw)

    def _brpop_start(self, timeout=None):
        try:
            return super()._brpop_start(timeout)
        except MOVING as moved:
            raise self._moved(moved) from moved

    def _brpop_read(self, **options):
        try:
            return super()._brpop_read(**options)
        except MOVING as moved:
            raise self._moved(moved) from moved
        except redis_errors.ResponseError as error:
            # A primary that turns replica (CLUSTER FAILOVER) answers a blocked BLMOVE "UNBLOCKED ... (master ->
            # replica?)": nothing was moved, the slot is served elsewhere now; any other error is not ours to read.
            if not str(error).startswith(UNBLOCKED):
                raise
            raise self._moved(error) from error

    def _moved(self, moved):
        """The slot is served elsewhere now: read the cluster's map again and give the fetch connection up as lost
        (what its fetch may have moved is given back after the reconnection, as after any lost connection)."""
        self.slot.refresh()
        self._heartbeat_replies = 0
        self._lost_fetch = self._pending_lists
        connection = self.__dict__.get("client") and self.client.connection
        if connection is not None:
            connection.disconnect()
        return redis_errors.ConnectionError(f"the slot of partition {self.key_tag} moved ({moved}): reconnecting")


class ClusterChannel(transport.Channel):
    """A class's channel on a Redis Cluster: it publishes (each partition's queue lives on its own slot), binds and
    answers remote control through the cluster; it consumes through one PartitionChannel per partition."""

    QoS = ClusterQoS
    cluster_seeds = ()
    _published = 0  # fan-out messages sent: which primary takes the next
    from_transport_options = (*transport.Channel.from_transport_options, "cluster_seeds")
    # kombu's exchange tables share one slot: its binding scripts touch a table and the deadlines' set together.
    keyprefix_queue = BINDINGS_TAG + "_kombu.binding.%s"
    keyprefix_binding_deadlines = BINDINGS_TAG + "_kombu.binding_deadlines"
    keyprefix_binding_permanent = BINDINGS_TAG + "_kombu.binding_permanent.%s"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # What kombu's pool would have filled in (a cluster has only database 0), so that remote control's channels
        # are named as on one Redis.
        self.keyprefix_fanout = self.keyprefix_fanout.format(db=0)

    @cached_property
    def cluster(self):
        """This process's RedisCluster for the class whose seeds the transport options name."""
        return get_redis(cluster_url(self.cluster_seeds))

    @cached_property
    def children(self):
        return {}

    @property
    def active_queues(self):
        # The partition channels fetch; this one is never polled for a fetch of its own.
        return []

    def _create_client(self, asynchronous=False):
        return self.cluster

    def scripts(self, client):
        cache = self.__dict__.setdefault("_scripts", {})
        if not cache:
            source = {name: lua_source(engine_scripts.path(name)) for name in transport.SCRIPTS}
            cache.update({name: self.cluster.register_script(text) for name, text in source.items()})
        return cache

    @cached_property
    def subclient(self):
        """Pub/sub for remote control on one primary: a cluster's PUBLISH reaches every node."""
        node = self.cluster.get_primaries()[0]
        pool = node.redis_connection.connection_pool
        # The node's connection class too: on a rediss+cluster:// URL it is SSLConnection, and its ssl_* keywords
        # are not a plain Connection's.
        pool = redis.ConnectionPool(connection_class=pool.connection_class, **pool.connection_kwargs)
        return redis.Redis(connection_pool=pool).pubsub()

    def _put_fanout(self, exchange, message, routing_key, **kwargs):
        # Celery's task events and broadcast commands: a cluster's PUBLISH reaches every node whichever takes it,
        # so each goes to the next primary in turn rather than all to one (three events a task would make that
        # primary the busiest of the cluster).
        kwargs.pop("_publish_batch", None)  # without batches (transport.Channel.supports_batch_publish)
        primaries = self.cluster.get_primaries()
        self._published += 1
        client = self.cluster.get_redis_connection(primaries[self._published % len(primaries)])
        payload = dumps(message)
        for topic in self._get_publish_topics(exchange, routing_key):
            client.publish(topic, payload)

    def _delete(self, queue, exchange, routing_key, pattern, *args, **kwargs):
        # kombu's chains its pipeline's delete(), which redis-py's cluster pipeline does not return; the cluster
        # client splits a DEL of keys in several slots by itself.
        self.auto_delete_queues.discard(queue)
        member = self.sep.join([routing_key or "", pattern or "", queue or ""])
        self.cluster.srem(self.keyprefix_queue % (exchange,), member)
        self.cluster.srem(self.keyprefix_binding_permanent % (exchange,), member)
        self.cluster.delete(*(self._q_for_pri(queue, pri) for pri in self.priority_steps))

    def basic_consume(self, queue, *args, **kwargs):
        found = super().basic_consume(queue, *args, **kwargs)
        self._sync_children()
        return found

    def _basic_cancel(self, consumer_tag):
        found = super()._basic_cancel(consumer_tag)
        self._sync_children()
        return found

    def _sync_children(self):
        """One PartitionChannel per partition this channel consumes, each fetching that partition's queues."""
        if self.closed:
            # A closed channel's partition channels are closed with it (close()); Celery still cancels its consumer
            # on a closed channel after a lost connection, which must not open new ones on no connection.
            return
        wanted = {}
        for queue in self._active_queues:
            if queue not in self.active_fanout_queues:
                wanted.setdefault(partition_tag_of(queue), []).append(queue)
        for tag in set(self.children) - set(wanted):
            self.children.pop(tag).close()
        for tag, queues in wanted.items():
            child = self.children.get(tag)
            if child is None:
                self.children[tag] = PartitionChannel(self.connection, self, tag, queues)
            else:
                child._active_queues = queues
                child._update_queue_cycle()

    def close(self):
        transport_ = self.connection
        super().close()
        for child in list(self.children.values()):
            child.connection = child.connection or transport_
            child.close()
        self.children.clear()


class ClusterTransport(transport.Transport):
    """Sluice's transport for a class on a Redis Cluster (pipeline.redis.addresses.celery_broker)."""

    Channel = ClusterChannel

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # A slot on the move, or a cluster no node of which answers: reconnect, as after a lost connection (nothing
        # was run).
        self.connection_errors = (*self.connection_errors, *MOVING, redis_errors.RedisClusterException)


def partition_tag_of(queue):
    """The hash tag a partition's queue name starts with; for any other queue (a reply queue of `celery inspect`),
    the queue's whole name as a tag: its keys then share the queue's own slot."""
    if queue.startswith("{") and "}" in queue:
        return queue[: queue.index("}") + 1]
    return "{" + queue + "}"


def cluster_url(seeds):
    """The Sluice URL of the cluster whose seeds are ``seeds`` ("host:port" each): the one of SLUICE_QUEUES that names
    them, so its credentials and TLS come from the settings, never from the transport options."""
    from pipeline.conf import sluice_settings

    wanted = tuple(sorted((host, int(port)) for host, port in (seed.rsplit(":", 1) for seed in seeds)))
    for queue in sluice_settings().queues.values():
        if queue.clustered and addresses.identity(queue.redis_url) == ("cluster", wanted):
            return queue.redis_url
    raise redis_errors.ConnectionError(f"no class of SLUICE_QUEUES is on the Redis Cluster of seeds {list(seeds)}")
