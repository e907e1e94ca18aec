"""Batch fetch: a send task takes more messages of its queue at once, reliably, and acks or gives back each one.

The messages a batch takes move, in one step (batch_take.lua), from the queue into a processing list of a batch
consumer, registered with the reliable fetch's reaper (pipeline.broker.reaper) in that same step, and only when it took
something: a consumer that holds nothing is not in the reaper's registry, so idle threads cost a reaper nothing. The
consumer keeps a heartbeat while the batch runs; a worker killed mid-batch stops it, and any worker's reaper moves
what the batch held back to the queue. Each message leaves the processing list on its own: acked once it was handled
(sent, retried or dead-lettered), or given back to the end of the queue workers take from next when the batch did
not start it. Once the batch has ended every message, release() takes the consumer out of the registry.
"""

import os
import socket
import threading
import time
import uuid

from pipeline.broker import reaper
from pipeline.conf import CLASSES, queue_lists, sluice_settings, transport_options
from pipeline.connections import class_redis, get_redis, script, shared_redis
from pipeline.gates.gate import partition_of
from pipeline.redis import keys

_local = threading.local()


def dead_after_s():
    """How long a batch consumer that stopped saying it is alive keeps its messages: the transport's
    fetch_dead_after_s, the same for every consumer the reaper watches."""
    return float(transport_options()["fetch_dead_after_s"])


class BatchConsumer:
    """One thread's identity in the reaper's registry, for the messages its batches take."""

    def __init__(self):
        self.pid = os.getpid()
        self.id = f"{socket.gethostname()}:{self.pid}:batch-{uuid.uuid4().hex[:8]}"
        self._alive_at = float("-inf")
        # The Redis of the queue its batches take from (a worker serves one class's Redis).
        self.client = None
        # The source lists it is registered with while it holds messages; None while it holds nothing.
        self.sources = None

    def take(self, queue, count):
        """Move up to ``count`` messages of ``queue`` (its priority sub-lists included) into this consumer's
        processing lists; return them as [(source, raw)], oldest first."""
        if count <= 0:
            return []
        sources = queue_lists(queue)
        processing = [keys.fetch_processing(self.id, source) for source in sources]
        self.client = redis_of(queue)
        held_before = self.sources is not None
        # Before the call: a take whose reply dies with its connection (a primary killed) may still have moved
        # messages, and release() puts back what the processing lists hold only for a consumer with sources.
        self.sources = sources
        reply = script("batch_take", on=self.client)(
            keys=[
                keys.fetch_consumers(),
                keys.fetch_alive(self.id),
                keys.fetch_sources(self.id),
                *sources,
                *processing,
            ],
            args=[count, int(dead_after_s() * 1000), self.id],
        )
        self._alive_at = time.monotonic()
        if not reply and not held_before:
            self.sources = None  # it took nothing, and holds nothing
        return [(reply[i].decode(), reply[i + 1]) for i in range(0, len(reply), 2)]

    def alive(self):
        """Renew the heartbeat while a batch holds messages; at most every quarter of the dead-after time."""
        now = time.monotonic()
        ttl_s = dead_after_s()
        if self.sources is None or now - self._alive_at < reaper.interval_s(ttl_s):
            return
        self._alive_at = now
        (self.client or get_redis()).set(keys.fetch_alive(self.id), 1, px=int(ttl_s * 1000))

    def ack(self, done):
        """Take handled messages ([(source, raw)]) out of the processing lists: they are never redelivered."""
        if not done:
            return
        pipe = (self.client or get_redis()).pipeline(transaction=False)
        for source, raw in done:
            pipe.lrem(keys.fetch_processing(self.id, source), -1, raw)
        pipe.execute()

    def give_back(self, messages):
        """Put messages the batch did not start ([(source, raw)], oldest first) back where workers take next."""
        by_source = {}
        for source, raw in messages:
            by_source.setdefault(source, []).append(raw)
        back = 0
        for source, raws in by_source.items():
            give_back = script("batch_give_back", on=self.client or get_redis())
            back += give_back(keys=[keys.fetch_processing(self.id, source), source], args=raws)
        return back

    def release(self):
        """Leave the reaper's registry once the batch has acked or given back every message it took. Anything still
        in a processing list (never, unless a message was taken twice) goes back to its queue first."""
        if self.sources is None:
            return
        # A batch consumer has no delivery tags: kombu never delivered its messages.
        reaper.release(self.client or get_redis(), self.id, self.sources, restore_tag=_no_tags)
        self.sources = None


def _no_tags(tag):
    """A batch consumer's tags set stays empty (only the transport's fetch records delivery tags): nothing to do."""


def redis_of(queue):
    """The Redis of the class whose queue is ``queue``: on a Redis Cluster, its partition's client (the partition
    being handled: a batch takes from its own task's queue)."""
    queues = sluice_settings().queues
    for klass in CLASSES:
        if queue in queues[klass].queue_names:
            return class_redis(klass)
    raise LookupError(f"queue {queue!r} is no class's queue (SLUICE_QUEUES)")


def consumer():
    """This thread's batch consumer (a forked child builds its own)."""
    current = getattr(_local, "consumer", None)
    if current is None or current.pid != os.getpid():
        current = _local.consumer = BatchConsumer()
    return current


def retire(batch_consumer):
    """Stop using ``batch_consumer`` in this thread: its heartbeat lapses and a reaper puts back what it holds."""
    if getattr(_local, "consumer", None) is batch_consumer:
        _local.consumer = None


def share_of_margin(queue, klass):
    """The most messages one batch of ``klass`` takes besides its own: its slot's share of the room between the
    queue's capacity and its hard ceiling (the class's pool profile gives the slots). Taken messages leave the
    queue's count, so admission refills it; when every slot gives its batch back at once (critical arrived, a
    worker died), the queue still stays within its ceiling."""
    from pipeline.broker.profiles import PROFILES

    return max(0, (queue.ceiling - queue.capacity) // PROFILES[klass].concurrency)


def critical_active(channel, payload=None):
    """True while a critical send waits on ``channel``'s gate (the partition of a send with ``payload``, or the
    whole channel's room), or within its hold window after the last one: a batch then gives back the messages it
    has not started."""
    gate = sluice_settings().channels[channel].gate
    if gate is None or not sluice_settings().gate_enabled:
        return False
    state, waiting, _active = keys.gate(channel, partition_of(gate, payload))
    pipe = shared_redis().pipeline(transaction=True)
    # The waiter that expires last: any live one means a critical send is waiting now.
    pipe.time().hget(state, "cl").zrange(waiting, -1, -1, withscores=True)
    if gate.partition_by:
        pipe.zrange(keys.gate_channel(channel)[1], -1, -1, withscores=True)
    (seconds, micros), last_critical, *waiters = pipe.execute()
    now_ms = seconds * 1000 + micros // 1000
    if any(expires > now_ms for found in waiters for _lease, expires in found):
        return True
    return last_critical is not None and 0 <= now_ms - float(last_critical) < gate.hold_ms
