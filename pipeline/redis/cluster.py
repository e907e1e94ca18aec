"""A class on a Redis Cluster: its partitions, their hash tags, and a client that follows one slot wherever it moves.

A partition is a keyspace of one Redis in all but name: every key Sluice and kombu use for it starts with the
partition's hash tag, so every script still runs on one slot, on one primary, in one round trip, and everything that
works on one Redis works on a partition. A user belongs to one partition (a stable hash of the user id).
"""

import threading
import time
import zlib
from functools import lru_cache

import redis
from redis import exceptions as redis_errors
from redis.client import Pipeline
from redis.cluster import ClusterNode, RedisCluster
from redis.commands.core import Script
from redis.crc import REDIS_CLUSTER_HASH_SLOTS, key_slot

#: A slot on the move (a reshard's MIGRATE, a shard's failover) answers MOVED, ASK, TRYAGAIN or CLUSTERDOWN: the
#: command was not run, so it is sent again, to the slot's primary as the cluster says it is now.
MOVING = (
    redis_errors.MovedError,
    redis_errors.AskError,
    redis_errors.TryAgainError,
    redis_errors.ClusterDownError,
    redis_errors.SlotNotCoveredError,  # this process's map has the slot nowhere (a shard's primary just failed)
)
#: What a producer hears, as Unavailable, when a cluster stays unsettled past SETTLE_S or no node of it answers.
CLUSTER_UNSETTLED = (*MOVING, redis_errors.RedisClusterException)
#: How long a call waits for a slot to settle before the error is its caller's: longer than one slot's migration
#: (milliseconds) and a replica's promotion by CLUSTER FAILOVER; shorter than a producer's patience.
SETTLE_S = 5.0
RETRY_PAUSE_S = 0.01


def make_cluster(parsed, auth, options):
    """A redis-py RedisCluster for a parsed redis+cluster:// URL: its seed nodes, credentials, TLS and timeouts; no
    retries of its own beyond following slots (SlotClient does that, bounded)."""
    auth = {k: v for k, v in auth.items() if k != "db"}
    return RedisCluster(
        startup_nodes=[ClusterNode(host, port) for host, port in parsed.hosts],
        require_full_coverage=False,
        **auth,
        **options,
    )


def partition_of(user_id, partitions):
    """The partition of ``user_id`` among ``partitions``: CRC-32 of its text, so every process and release agrees."""
    if partitions == 1:
        return 0
    return zlib.crc32(str(user_id).encode()) % partitions


@lru_cache(maxsize=256)
def partition_tag(queue, partition, partitions):
    """The hash tag of one partition of ``queue``, as "{...}": chosen so that its slot lies in the partition's own
    share of the 16,384 slots (partition p of P in [p·16384/P, (p+1)·16384/P)). A cluster created with its slots in
    even ranges (as `redis-cli --cluster create` makes them) then holds the same number of partitions on each primary
    whenever the primaries divide the partitions."""
    low = partition * REDIS_CLUSTER_HASH_SLOTS // partitions
    high = (partition + 1) * REDIS_CLUSTER_HASH_SLOTS // partitions
    n = 0
    while True:
        body = f"{queue}.{partition}.{n}" if n else f"{queue}.{partition}"
        if low <= key_slot(body.encode()) < high:
            return "{" + body + "}"
        n += 1


def tagged(tag, key):
    """``key`` in the partition of ``tag``: the tag in front, unless the key starts with it already."""
    return key if not tag or key.startswith(tag) else tag + key


def share(total, partition, partitions):
    """Partition ``partition``'s share of ``total`` (a capacity, a ceiling): the shares differ by at most one and sum
    to ``total`` exactly."""
    return total // partitions + (1 if partition < total % partitions else 0)


#: Where the keys are in each command Sluice runs (pipeline.redis.addresses.ACL_COMMANDS): the first argument, all of
#: them, the first two, or none. EVAL and EVALSHA name their keys' count; XINFO STREAM's key follows its subcommand.
FIRST_KEY = frozenset(
    """expire expireat pexpire pttl get set hdel hexists hget hgetall hincrby hincrbyfloat hkeys hlen hmget hset
    hsetnx hstrlen hvals lindex llen lpop lpush lrange lrem rpop rpush sadd scard smembers spop srem sscan zadd zcard
    zcount zpopmin zrange zrangebyscore zrem zremrangebyscore zrevrangebyscore zscore xadd xlen xrange xtrim incr
    incrby decr getdel type ttl persist""".split()
)
ALL_KEYS = frozenset(("del", "exists", "watch", "unlink", "mget"))
TWO_KEYS = frozenset(("blmove", "lmove", "rename"))
NO_KEYS = frozenset(
    "hello select ping script multi exec discard unwatch wait time echo publish psubscribe punsubscribe".split()
)


def with_tag(tag, args):
    """A command's arguments with each of its keys in the partition of ``tag`` (tagged()); a command with no rule here
    is refused, so that no key ever leaves its partition unnoticed."""
    if args[0] == "EVALSHA":
        # Every admission's one command: the short way.
        end = 3 + int(args[2])
        return (*args[:3], *[k if k.startswith(tag) else tag + k for k in map(str, args[3:end])], *args[end:])
    words = str(args[0]).lower().split()  # redis-py sends "SCRIPT LOAD", "XINFO STREAM" as one argument
    name = words[0]
    if name == "xinfo":
        at = 1 if len(words) > 1 else 2
        return (*args[:at], tagged(tag, str(args[at])), *args[at + 1 :])
    if name in NO_KEYS:
        return args
    if name in FIRST_KEY:
        return (args[0], tagged(tag, str(args[1])), *args[2:])
    if name in ALL_KEYS:
        return (args[0], *(tagged(tag, str(key)) for key in args[1:]))
    if name in TWO_KEYS:
        return (args[0], tagged(tag, str(args[1])), tagged(tag, str(args[2])), *args[3:])
    if name in ("eval", "evalsha"):
        count = int(args[2])
        return (*args[:3], *(tagged(tag, str(key)) for key in args[3 : 3 + count]), *args[3 + count :])
    raise ValueError(f"{args[0]!r} has no key rule for a cluster partition (pipeline.redis.cluster)")


class PartitionRedis(redis.Redis):
    """A plain client of one node that keeps every key in one partition: each command's keys get the partition's tag
    (with_tag()), in its pipelines too. Code written for one Redis runs on a partition unchanged."""

    def __init__(self, tag, **kwargs):
        super().__init__(**kwargs)
        self.tag = tag

    def execute_command(self, *args, **options):
        return super().execute_command(*with_tag(self.tag, args), **options)

    def pipeline(self, transaction=True, shard_hint=None):
        return PartitionPipeline(self.tag, self.connection_pool, self.response_callbacks, transaction, shard_hint)


class PartitionPipeline(Pipeline):
    """PartitionRedis's pipeline."""

    def __init__(self, tag, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.tag = tag

    def execute_command(self, *args, **kwargs):
        return super().execute_command(*with_tag(self.tag, args), **kwargs)


class SlotClient:
    """A client of one partition of a cluster: each command goes to the primary that serves the partition's slot now,
    through a PartitionRedis that keeps its keys in the partition, so scripts, pipelines and WAIT behave as on one
    Redis; a call that met a slot on the move is sent again once it settled (run())."""

    def __init__(self, cluster, tag):
        self.cluster = cluster
        self.tag = tag
        self.slot = key_slot(tag.encode())
        self._lock = threading.Lock()
        self._clients = {}
        # (the map it was read from, the client): one tuple, so a thread never pairs one map with another's client.
        self._current = (None, None)

    def node(self):
        """The partition's client on the slot's primary, as this process's map of the cluster says (read again only
        when the map was: every notify() asks)."""
        manager = self.cluster.nodes_manager
        known, client = self._current
        if known is manager.slots_cache and client is not None:
            return client
        slots = manager.slots_cache
        node = manager.get_node_from_slot(self.slot)
        client = self._clients.get(node.name)
        if client is None:
            pool = self.cluster.get_redis_connection(node).connection_pool
            client = self._clients.setdefault(node.name, PartitionRedis(self.tag, connection_pool=pool))
        self._current = (slots, client)
        return client

    def run(self, call):
        """``call(client)`` on the slot's primary; after MOVED, ASK, TRYAGAIN or CLUSTERDOWN (nothing was run) the map
        is read again and the call sent again, for at most SETTLE_S. A connection that failed is not sent again (the
        call may have run): the map is read again for the next call, which then finds a primary promoted meanwhile."""
        deadline = time.monotonic() + SETTLE_S
        while True:
            try:
                return call(self.node())
            except MOVING:
                if time.monotonic() >= deadline:
                    raise
                self.refresh()
                time.sleep(RETRY_PAUSE_S)
            except (redis_errors.ConnectionError, redis_errors.TimeoutError):
                self.refresh()
                raise

    def refresh(self):
        """Read the cluster's map again (one thread at a time: the others use the map it reads)."""
        if self._lock.acquire(blocking=False):
            try:
                self.cluster.nodes_manager.initialize()
            except (redis_errors.RedisError, redis_errors.RedisClusterException):
                pass  # the next call's error says what is wrong
            finally:
                self._lock.release()

    def pipeline(self, transaction=True, shard_hint=None):
        """A pipeline on the slot's primary now; a caller that must follow a moved slot runs it inside run()."""
        return self.node().pipeline(transaction=transaction, shard_hint=shard_hint)

    def register_script(self, script):
        """A script that runs on this partition wherever its slot is (EVALSHA through run())."""
        return Script(self, script)

    def __getattr__(self, name):
        attribute = getattr(self.node(), name)
        if not callable(attribute):
            return attribute
        return lambda *args, **kwargs: self.run(lambda client: getattr(client, name)(*args, **kwargs))
