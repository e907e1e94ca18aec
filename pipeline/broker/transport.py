"""kombu's Redis transport with a reliable fetch, and the hard queue ceiling on every publish that skips admission.

Reliable fetch (as Sidekiq Pro does it). kombu pops with BRPOP and records the message in its unacked
hash afterwards, in a second round trip: a worker killed between the two, or a Redis that dies there,
loses the message, and a worker killed while it waits in BRPOP still receives the next message on its
dead socket. Here a message moves from the queue into a processing list of this consumer in one atomic
step (BLMOVE, or fetch_any.lua across several lists), and from there into kombu's unacked record in one
more (fetch_record.lua). Each consumer keeps a heartbeat in Redis; any consumer's reaper moves a dead
one's processing list back to its queue and restores its unacked messages at once, instead of after the
visibility timeout. The unacked format stays kombu's, so Celery, Flower and `celery inspect` work as before.

This subclasses private methods of kombu 5.7.0's Redis transport, which is why kombu is pinned exactly
(tests/integration/test_transport.py exercises every one of them).
"""

import logging
import os
import socket
import time
import uuid
from queue import Empty

from kombu.transport import redis
from kombu.transport.virtual import QoS as VirtualQoS
from kombu.utils.encoding import bytes_to_str
from kombu.utils.json import dumps, loads
from kombu.utils.objects import cached_property
from kombu.utils.url import _parse_url
from redis import Redis as RedisClient
from redis import exceptions as redis_errors
from redis.sentinel import Sentinel

from pipeline.broker import reaper
from pipeline.connections import lua_source
from pipeline.connections import script as engine_scripts
from pipeline.errors import QueueCeilingReached
from pipeline.redis import keys
from pipeline.redis.sentinel import FollowingSentinelPool

logger = logging.getLogger("sluice.fetch")

TESTED_KOMBU = "5.7.0"
# A consumer that has not said it is alive for this long is dead: its messages go back. Longer than any
# stall of a live worker's event loop; far shorter than the visibility timeout it replaces for kills.
DEAD_AFTER_S = 60
SCRIPTS = ("fetch_record", "push_capped")


class QoS(redis.QoS):
    """kombu's ack emulation; a delivery is recorded together with its leaving the processing list."""

    def append(self, message, delivery_tag):
        channel = self.channel
        fetched, channel._fetched = channel._fetched, None
        # The channel that fetched it keeps its record: this one, or one of its cluster partitions' channels.
        holder, channel._fetched_by = channel._fetched_by or channel, None
        delivery = message.delivery_info
        entry = dumps([message._raw, delivery["exchange"], delivery["routing_key"]])
        source, raw = fetched if fetched else ("", "")
        with holder.conn_or_acquire() as client:
            holder.scripts(client)["fetch_record"](
                keys=[
                    keys.fetch_processing(holder.consumer_id, source, holder.key_tag),
                    holder.unacked_key,
                    holder.unacked_index_key,
                    keys.fetch_tags(holder.consumer_id, holder.key_tag),
                ],
                args=[raw, delivery_tag, entry, time.time()],
            )
        self.held(delivery_tag, holder)
        VirtualQoS.append(self, message, delivery_tag)

    def held(self, delivery_tag, holder):
        """Note that ``holder`` keeps the record of ``delivery_tag``: on one Redis, always this QoS's channel."""

    def _remove_from_indices(self, delivery_tag, pipe=None):
        with self.pipe_or_acquire(pipe) as pipe:
            return (
                pipe.zrem(self.unacked_index_key, delivery_tag)
                .hdel(self.unacked_key, delivery_tag)
                .srem(keys.fetch_tags(self.channel.consumer_id, self.channel.key_tag), delivery_tag)
            )


class Channel(redis.Channel):
    """A Redis channel with the reliable fetch, whose _put refuses to push onto a Sluice queue at its ceiling."""

    QoS = QoS
    # A batched publish would bypass _put's check; without batches every message goes through it.
    supports_batch_publish = False
    fetch_dead_after_s = DEAD_AFTER_S
    from_transport_options = (*redis.Channel.from_transport_options, "fetch_dead_after_s")

    _fetched = None
    # The channel whose fetch _fetched came from, when not this one (a cluster partition's: its QoS records it).
    _fetched_by = None
    # A cluster partition's hash tag (pipeline.broker.cluster_transport): every fetch key of this channel starts with
    # it, so they live on the partition's slot; "" on one Redis.
    key_tag = ""
    # The list the pending BLMOVE blocks on, or None while a fetch_any.lua is pending.
    _blocking_on = None
    # With several lists: fetch_any.lua found them all empty, so the next fetch blocks on the first.
    _block_next = False
    _housekept_at = float("-inf")
    _heartbeat_replies = 0
    # The lists of a fetch whose connection failed before its reply came: Redis may have moved a message into this
    # consumer's processing list and the reply died with the connection (a primary killed, a failover).
    _lost_fetch = ()
    _pending_lists = ()
    # The fetch connection whose reconnections this channel watches, and whether it has connected once already.
    _watched = None
    _connected_once = False

    @property
    def fetch_owner(self):
        """The channel whose consumer this one's fetches are delivered to, and whose QoS records them: this one; a
        cluster partition's channel fetches for its class's channel (pipeline.broker.cluster_transport)."""
        return self

    @cached_property
    def consumer_id(self):
        """This channel's identity in the reaper's registry: host, process and a random part."""
        return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"

    def scripts(self, client):
        """The transport's Lua scripts, registered on ``client``'s connection pool."""
        cache = self.__dict__.setdefault("_scripts", {})
        pool = id(client.connection_pool)
        if pool not in cache:
            cache.clear()
            cache[pool] = {name: client.register_script(lua_source(engine_scripts.path(name))) for name in SCRIPTS}
        return cache[pool]

    # Fetch

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.fetch_dead_after_s <= 2 * (self.brpop_timeout or 1):
            # A pending BLMOVE must time out on the server well before its consumer can be taken for dead.
            raise ValueError(
                f"fetch_dead_after_s ({self.fetch_dead_after_s}) must be more than twice the fetch timeout "
                f"({self.brpop_timeout} s)"
            )

    def _fetch_lists(self, queues):
        return [self._q_for_pri(queue, pri) for pri in self.priority_steps for queue in queues]

    def _brpop_start(self, timeout=None):
        if timeout is None:
            timeout = self.brpop_timeout
        lists = self._fetch_lists(self._queue_cycle.consume(len(self.active_queues)))
        if not lists:
            return
        self.housekeeping(lists)
        if self._lost_fetch:
            self._give_back_lost_fetch()
        if len(lists) == 1 or self._block_next:
            # Block on one list: the only one, or the first once fetch_any.lua found every list empty (a
            # message arriving on another list meanwhile waits for the next round, at most the timeout).
            self._blocking_on = source = lists[0]
            processing = keys.fetch_processing(self.consumer_id, source, self.key_tag)
            fetch = ["BLMOVE", source, processing, "RIGHT", "LEFT", timeout or 0]
        else:
            self._blocking_on = None
            processing = [keys.fetch_processing(self.consumer_id, source, self.key_tag) for source in lists]
            fetch = ["EVAL", lua_source(engine_scripts.path("fetch_any")), len(lists) * 2, *lists, *processing]
        self._block_next = False
        connection = self.client.connection
        if connection is not self._watched:
            self._watched, self._connected_once = connection, bool(getattr(connection, "is_connected", False))
            connection.register_connect_callback(self._on_fetch_connect)
        self._in_poll = connection
        self._brpop_sent_at = time.monotonic()
        # Every fetch says first, in the same write, that this consumer is alive and where it fetches from. A
        # reaper that took a stalled consumer for dead and forgot it must never find, after the consumer really
        # dies, a processing list that nobody registered: a fetch is always preceded by its registration.
        heartbeat = self._heartbeat(lists)
        self._heartbeat_replies = len(heartbeat)
        self._pending_lists = lists
        connection.send_packed_command(connection.pack_commands([*heartbeat, fetch]))

    def _heartbeat(self, lists):
        """The commands that register this consumer as alive for fetch_dead_after_s (Redis's own clock)."""
        return [
            ["SET", keys.fetch_alive(self.consumer_id, self.key_tag), 1, "PX", int(self.fetch_dead_after_s * 1000)],
            ["SADD", keys.fetch_consumers(self.key_tag), self.consumer_id],
            ["SADD", keys.fetch_sources(self.consumer_id, self.key_tag), *lists],
        ]

    def _brpop_read(self, **options):
        source = self._blocking_on
        connection = self.client.connection
        done = True
        try:
            try:
                while self._heartbeat_replies:
                    self.client.parse_response(connection, "SADD", **options)
                    self._heartbeat_replies -= 1
                if source and not connection.can_read(timeout=0):
                    # Only the heartbeat's answers were in: BLMOVE is still waiting for a message.
                    done = False
                    raise Empty()
                reply = self.client.parse_response(connection, "BLMOVE" if source else "EVAL", **options)
            except self.connection_errors:
                # As kombu does: disconnect, so the next round reconnects; and what the fetch may have moved is
                # given back before the next one.
                self._heartbeat_replies = 0
                self._lost_fetch = self._pending_lists
                connection.disconnect()
                raise
            if reply is None:
                self._block_next = source is None
                raise Empty()
            if source is None:
                source, reply = bytes_to_str(reply[0]), reply[1]
            self._deliver_fetched(source, reply)
            return True
        finally:
            if done:
                self._in_poll = None
                self._flush_brpop_reauth()

    def _on_fetch_connect(self, connection):
        """Every reconnection of the fetch connection, however the old one was lost (an error read by the fetch, by
        the event loop, or by a delivery's record): what a fetch on it may have moved is given back before the
        fetch after the next one (the next is already on its way; once it is answered, the lists hold nothing but
        strays)."""
        if self._connected_once:
            self._lost_fetch = self._fetch_lists(self.active_queues)
        self._connected_once = True

    def _give_back_lost_fetch(self):
        """Put back at the end workers take from whatever a fetch lost with its connection moved into this consumer's
        processing lists. Between two fetches they hold nothing (a delivery leaves them as it is recorded), so all
        of it is the lost fetch's; while this consumer lives no reaper would take it, and a failover's new primary
        (replicated the move, never the reply) would keep it there until the worker died."""
        moved = 0
        with self.conn_or_acquire() as client:
            for source in self._lost_fetch:
                processing = keys.fetch_processing(self.consumer_id, source, self.key_tag)
                while client.lmove(processing, source, "LEFT", "RIGHT"):
                    moved += 1
        self._lost_fetch = ()  # only once it worked: a Redis still away is tried again next round
        if moved:
            logger.warning("a fetch lost with its connection had taken %d message(s): put back in their queue", moved)

    def _deliver_fetched(self, source, raw):
        queue = source.rsplit(self.sep, 1)[0]
        self._queue_cycle.rotate(queue)
        try:
            payload = loads(bytes_to_str(raw))
        except (TypeError, ValueError):
            self._dead_letter_undecodable(source, raw)
            raise Empty() from None
        owner = self.fetch_owner
        owner._fetched, owner._fetched_by = (source, raw), (self if owner is not self else None)
        processing = keys.fetch_processing(self.consumer_id, source, self.key_tag)
        try:
            self.connection._deliver(payload, queue)
        except BaseException:
            if owner._fetched is not None:
                # Not recorded, not handled: back to the end of the queue workers take from.
                owner._fetched = owner._fetched_by = None
                with self.conn_or_acquire() as client:
                    client.pipeline(transaction=True).lrem(processing, -1, raw).rpush(source, raw).execute()
            raise
        if owner._fetched is not None:
            # Handled without being recorded (a consumer without acks): it leaves the processing list.
            owner._fetched = owner._fetched_by = None
            with self.conn_or_acquire() as client:
                client.lrem(processing, -1, raw)

    def _dead_letter_undecodable(self, source, raw):
        from pipeline.broker.deadletters import add

        logger.error("a message on %s is not valid JSON: dead-lettered", source)
        add("", "", {"raw": bytes_to_str(raw)[:4096]}, "undecodable", "not valid JSON", 1)
        with self.conn_or_acquire() as client:
            client.lrem(keys.fetch_processing(self.consumer_id, source, self.key_tag), -1, raw)

    # Heartbeat and reaper

    def housekeeping(self, lists=None, force=False):
        """Say this consumer is alive, and reap dead consumers; at most every quarter of the dead-after time
        unless ``force``. Every fetch also says it is alive; this keeps it so while every slot is busy."""
        now = time.monotonic()
        # A little less than the interval: the timer firing a hair early must not skip a turn.
        if not force and now - self._housekept_at < reaper.interval_s(self.fetch_dead_after_s) * reaper.LOCK_SHARE:
            return
        self._housekept_at = now
        lists = lists if lists is not None else self._fetch_lists(self.active_queues)
        with self.conn_or_acquire() as client:
            if lists:
                pipe = client.pipeline(transaction=False)
                for command in self._heartbeat(lists):
                    pipe.execute_command(*command)
                pipe.execute()
            for dead in reaper.scan(client, self.fetch_dead_after_s, self._restorer(client), self.key_tag):
                if dead.moved or dead.tags:
                    logger.warning(
                        "consumer %s stopped answering: %d fetched and %d unacked messages put back",
                        dead.consumer,
                        dead.moved,
                        len(dead.tags),
                    )

    def _restorer(self, client):
        return lambda tag: self.qos.restore_by_tag(tag, client)

    def close(self):
        transport = self.connection
        super().close()
        if "consumer_id" not in self.__dict__ or transport is None or transport.client is None:
            return
        # A clean close gives back at once what a reaper would give back later, and leaves nothing registered. It
        # runs after kombu's close, which reads a fetch still pending, and kombu has detached the channel: attach
        # it for this last step.
        self.connection = transport
        try:
            with self.conn_or_acquire() as client:
                sources = [bytes_to_str(s) for s in client.smembers(keys.fetch_sources(self.consumer_id, self.key_tag))]
                reaper.release(client, self.consumer_id, sources, self._restorer(client), self.key_tag)
        except self.connection_errors:
            pass  # left to the reaper
        finally:
            self._disconnect_pools()
            self.connection = None

    # The collected connection

    def _connparams(self, asynchronous=False):
        if self.connection is None or self.connection.client is None:
            # kombu's Connection.collect() dropped the transport's client after a connection error; building a
            # client now would die with an AttributeError that Celery treats as unrecoverable.
            raise redis_errors.ConnectionError("the broker connection was closed after a connection error")
        return super()._connparams(asynchronous)

    # Publish

    def _put(self, queue, message, **kwargs):
        ceiling = _ceilings().get(queue)
        if ceiling is None:
            return super()._put(queue, message, **kwargs)
        target = self._q_for_pri(queue, self._get_message_priority(message, reverse=False))
        lists = [self._q_for_pri(queue, step) for step in self.priority_steps]
        with self.conn_or_acquire() as client:
            depth = self.scripts(client)["push_capped"](keys=[target, *lists], args=[ceiling, dumps(message)])
        if depth < 0:
            raise QueueCeilingReached(f"queue {queue!r} is at its hard ceiling of {ceiling} messages")


class Transport(redis.Transport):
    Channel = Channel

    def register_with_event_loop(self, connection, loop):
        super().register_with_event_loop(connection, loop)
        cycle = self.cycle
        old = getattr(cycle, "_sluice_housekeeping_tref", None)
        if old is not None:
            old.cancel()
        interval = reaper.interval_s(connection.client.transport_options.get("fetch_dead_after_s", DEAD_AFTER_S))
        # The heartbeat also rides on every fetch; this keeps it going while every slot is busy.
        cycle._sluice_housekeeping_tref = loop.call_repeatedly(interval, _housekeeping, cycle)


class SentinelChannel(Channel, redis.SentinelChannel):
    """The reliable fetch over kombu's Sentinel channel, on pools that follow a failover within a second
    (pipeline/redis/sentinel.py): the acks and the reaper move to the new master by themselves, and the fetch
    connection, which stays open for good, is given up as lost when the master moved, so the worker reconnects to the
    new one."""

    from_transport_options = tuple(
        dict.fromkeys((*Channel.from_transport_options, *redis.SentinelChannel.from_transport_options))
    )
    _master_checked_at = float("-inf")

    def _sentinel_managed_pool(self, asynchronous=False):
        # kombu 5.7.0's, with FollowingSentinelPool instead of redis-py's pool.
        connparams = self._connparams(asynchronous)
        params = {k: v for k, v in connparams.items() if k not in ("host", "port")}
        sentinels = []
        for url in self.connection.client.alt:
            parts = _parse_url(url)
            if parts.scheme == "sentinel":
                sentinels.append((parts.hostname, parts.port or self.connection.default_port))
        if not sentinels:
            sentinels.append((connparams["host"], connparams["port"]))
        manager = Sentinel(
            sentinels,
            min_other_sentinels=getattr(self, "min_other_sentinels", 0),
            sentinel_kwargs=getattr(self, "sentinel_kwargs", None),
            **params,
        )
        if asynchronous:
            self._async_sentinel_manager = manager
        else:
            self._sentinel_manager = manager
        if getattr(self, "master_name", None) is None:
            raise ValueError("'master_name' transport option must be specified.")
        credentials = {k: params[k] for k in ("username", "password") if k in params}
        return manager.master_for(
            self.master_name, RedisClient, connection_pool_class=FollowingSentinelPool, **credentials
        ).connection_pool

    def _brpop_start(self, timeout=None):
        now = time.monotonic()
        if now - self._master_checked_at >= FollowingSentinelPool.recheck_s:
            self._master_checked_at = now
            client = self.client
            connection = getattr(client, "connection", None)
            if connection is not None and client.connection_pool.moved(connection):
                # As if the old master had gone away: the worker reconnects, and its new connection asks the
                # sentinels. Nothing is pending on this connection (no fetch was sent), so nothing is lost.
                raise redis_errors.ConnectionError("the Redis Sentinel master moved: reconnecting to the new one")
        return super()._brpop_start(timeout)


class SentinelTransport(Transport):
    """Sluice's transport for sentinel:// URLs (kombu's spelling: ``sentinel://h1:26379;sentinel://h2:26379``,
    with the master's name in the transport options)."""

    Channel = SentinelChannel
    default_port = redis.SentinelTransport.default_port


def _housekeeping(cycle):
    for channel in list(cycle._channels):
        if channel.active_queues:
            try:
                channel.housekeeping()
            except channel.connection_errors:
                logger.debug("fetch housekeeping: connection error, will retry", exc_info=True)


def _ceilings():
    from pipeline.conf import sluice_settings

    return {q.name: q.ceiling for q in sluice_settings().queues.values()}
