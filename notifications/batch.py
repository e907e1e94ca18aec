"""Send tasks in batches: a routine or background send task takes more messages of its queue and sends them together.

The task's own message comes first; up to ``SLUICE_QUEUES[class]["batch"] - 1`` more are taken from its queue through
the reliable fetch (pipeline.batch), so a worker killed mid-batch loses none of them. Then, message by message and in
order: the channel's gate is asked (per message, never per batch), the send is claimed, and the claimed sends of each
channel wait to go out together in one ``send_many`` call to the backend (one bulk call to the provider). When the
gate does not grant a send at once, the sends waiting go out first; when a critical send is what holds the channel,
the batch gives back every message it has not started, to the end of the queue workers take from next, with its claim
untouched. Each message then ends on its own, as a single send does: acked once sent, retried, dead-lettered, or
requeued, with its own metrics.
"""

import base64
import dataclasses
import json
import logging
import time
from contextlib import ExitStack
from types import SimpleNamespace

from celery.exceptions import Ignore, Reject, Retry

from pipeline import batch as fetch
from pipeline import gate
from pipeline.conf import sluice_settings
from pipeline.message import CHANNELS_HEADER
from pipeline.signals import PUBLISHED_AT

from . import expiry, providers, tasks
from .channels import get_channel, get_provider
from .channels.base import PermanentSendError

logger = logging.getLogger("sluice.batch")


@dataclasses.dataclass(eq=False)
class Item:
    """One message of a batch and what happened to it so far."""

    task: object
    kwargs: dict
    # (source list, raw message) for a message the batch took; None for the task's own message.
    fetched: tuple | None = None
    kind_obj: object = None
    messages: list = dataclasses.field(default_factory=list)
    expired: list = dataclasses.field(default_factory=list)
    failed: list = dataclasses.field(default_factory=list)
    started: bool = False
    given_back: bool = False
    # Why the message cannot finish here: another worker holds a claim, its gate had no room, an unexpected error.
    held_back: Exception | None = None
    gate_timeout: bool = False
    # Where its messages stopped when held back or timed out at the gate: it goes back with the channels from there.
    stopped_at: int = 0
    error: Exception | None = None
    # How it ended: None (handled), or the Retry, Ignore or Reject a single send task would have raised.
    outcome: BaseException | None = None


def deliver_batch(task, kwargs, size):
    """Send the task's own message together with up to ``size - 1`` more of its queue; raise what the task's own
    message ends with (Retry, Ignore, Reject), as deliver() does."""
    consumer = fetch.consumer()
    klass = tasks.class_of(task)
    queue = sluice_settings().queues[klass]
    size = min(size, 1 + fetch.share_of_margin(queue, klass))

    def take():
        items, unbatchable = [], []
        for source, raw in consumer.take(queue.name, size - 1):
            item = _item_of(task, source, raw)
            if item is None:
                unbatchable.append((source, raw))
            else:
                items.append(item)
        if unbatchable:
            # Another task's message, or a retry due later: a worker takes it next, as a message of its own.
            consumer.give_back(unbatchable)
        return items

    batch = Batch([Item(task, kwargs)], consumer, take)
    try:
        batch.run()
    except BaseException:
        # Not expected: whatever the batch took and did not end goes back; the task's own message is retried by
        # tasks.run().
        _end_or_retire(consumer, _give_back, [item for item in batch.items[1:] if item.outcome is None])
        raise
    _end_or_retire(consumer, _end_taken, batch.items[1:])
    logger.info("batch (%s): %s", klass, batch.summary())
    if batch.items[0].outcome is not None:
        raise batch.items[0].outcome


def _end_or_retire(consumer, end, items):
    """End the taken messages with ``end``; when that fails (Redis went away), retire this batch consumer: it stops
    saying it is alive, so a reaper puts back what it still holds, and this thread's next batch takes under a new
    identity. Without that, the next batch's heartbeat would keep those messages held forever."""
    try:
        end(consumer, items)
    except BaseException:
        fetch.retire(consumer)
        raise


def _end_taken(consumer, taken):
    """Ack every taken message that ended here; give back the ones that must be requeued or were not started."""
    done = [item.fetched for item in taken if not item.given_back and not isinstance(item.outcome, Reject)]
    back = [item for item in taken if item.given_back or isinstance(item.outcome, Reject)]
    consumer.ack(done)
    _give_back(consumer, back)


def _give_back(consumer, items):
    if items:
        back = consumer.give_back([item.fetched for item in items])
        logger.info("batch gave back %d of %d messages it did not start", back, len(items))


def _group_limit(channel):
    """The most claimed sends of ``channel`` one bulk call carries: its gate's burst when it has a rate limit (so a
    call never sends more at one instant than the token bucket allows), else no limit."""
    gate_conf = sluice_settings().channels[channel].gate
    if gate_conf is None or not sluice_settings().gate_enabled:
        return float("inf")
    bursts = []
    if gate_conf.rate_per_s:
        bursts.append(gate_conf.burst)
    if gate_conf.partition_by and (gate_conf.partition_rate_per_s or gate_conf.rate_per_s):
        bursts.append(gate_conf.partition_burst or gate_conf.burst)
    return max(1, min(bursts)) if bursts else float("inf")


def _send_one(message, conf):
    """One message through the channel's providers or its backend: its result, or the exception it raised."""
    try:
        if conf.providers:
            return providers.send(message, conf)
        return get_channel(message.channel).send(message)
    except Exception as exc:  # noqa: BLE001 - the message's own result
        return exc


def _item_of(task, source, raw):
    """The batch item of a taken message, or None when this batch must not handle it."""
    try:
        message = json.loads(raw)
        headers = message["headers"]
        if headers.get("task") != task.name or headers.get("eta") is not None:
            return None
        body = message["body"]
        if message.get("properties", {}).get("body_encoding") == "base64":
            body = base64.b64decode(body)
        _args, kwargs, _embed = json.loads(body)
    except (ValueError, KeyError, TypeError):
        # The task's own path dead-letters what cannot be decoded (pipeline.transport).
        return None
    restricted = headers.get(CHANNELS_HEADER)
    if restricted is not None and "channels" not in kwargs:
        kwargs = {**kwargs, "channels": list(restricted)}
    request = SimpleNamespace(id=headers.get("id"), kwargs=kwargs, retries=headers.get("retries") or 0)
    setattr(request, PUBLISHED_AT, headers.get(PUBLISHED_AT))
    return Item(SimpleNamespace(name=task.name, request=request), kwargs, fetched=(source, raw))


class Batch:
    """The sends of one batch, grouped by channel until they go out together."""

    def __init__(self, items, consumer, take):
        self.items = items
        self.consumer = consumer
        self.take = take
        self.pending = {}
        self.slots = ExitStack()
        # Set once a critical send was seen on a channel of this batch: the batch takes no more messages.
        self.critical_seen = False
        self.bulk_channels = {}

    def run(self):
        self.prepare(self.items)
        try:
            first = self.items[0]
            if self.ready(first):
                self.send_item(0, first)
            # More messages only once the task's own passed its gate: while critical holds a channel, a batch
            # would take messages only to give them back.
            if first.held_back is None and not first.gate_timeout and not self.critical_seen:
                taken = self.take()
                self.prepare(taken)
                self.items.extend(taken)
            for index in range(1, len(self.items)):
                item = self.items[index]
                if self.ready(item):
                    self.consumer.alive()
                    self.send_item(index, item)
            self.flush()
        finally:
            self.slots.close()
        for item in self.items:
            if not item.given_back and item.outcome is None:
                self.conclude(item)

    def summary(self):
        """How the batch's messages ended, in one line: "12 messages: 10 done, 1 retried, 0 dead-lettered, ..."."""
        ends = {"done": 0, "retried": 0, "dead-lettered": 0, "requeued": 0, "given back": 0}
        for item in self.items:
            if item.given_back:
                ends["given back"] += 1
            elif isinstance(item.outcome, Retry):
                ends["retried"] += 1
            elif isinstance(item.outcome, Ignore):
                ends["dead-lettered"] += 1
            elif item.outcome is not None:
                ends["requeued"] += 1
            else:
                ends["done"] += 1
        return f"{len(self.items)} messages: " + ", ".join(f"{n} {end}" for end, n in ends.items())

    @staticmethod
    def prepare(items):
        for item in items:
            try:
                item.kind_obj, item.messages = tasks.prepare(item.task, **item.kwargs)
            except (Retry, Ignore, Reject) as exc:
                item.outcome = exc
            except Exception as exc:  # noqa: BLE001 - retried, as tasks.run() retries it
                item.error = exc

    @staticmethod
    def ready(item):
        return not item.given_back and item.outcome is None and item.error is None

    def send_item(self, index, item):
        for position, message in enumerate(item.messages):
            item.stopped_at = position
            if expiry.passed(message.expires_at):
                # Never sent late: a sign-in code that arrives after it expired is worse than none.
                item.expired.append(message.channel)
                continue
            if not self.admit(index, message):
                item.gate_timeout = True
                self.give_back_after(index)
                return
            try:
                claimed = tasks.claim(message, getattr(item.task.request, PUBLISHED_AT, None))
            except tasks.ClaimedElsewhere as exc:
                item.held_back = exc
                return
            if claimed:
                item.started = True
                message = dataclasses.replace(message, deadline=tasks.send_deadline(message))
                group = self.pending.setdefault(message.channel, [])
                group.append((item, message))
                if not self.bulk(message.channel) or len(group) >= _group_limit(message.channel):
                    # No bulk call to wait for, or as many sends as the channel's rate allows at one instant: sent
                    # now, as a single send is, so a send never starts long after the gate granted it.
                    self.flush()

    def admit(self, index, message):
        """Pass the channel's gate for one message: at once, or after the sends waiting went out. Critical on the
        channel sends the messages after this one back to the queue. False when the gate had no room in time."""
        channel, klass, payload = message.channel, message.klass, message.payload
        try:
            self.slots.enter_context(gate.slot(channel, klass, payload, max_wait_s=0))
            return True
        except gate.GateTimeout:
            pass
        # Whatever holds the gate, the sends already claimed do not wait with this one.
        self.flush()
        if fetch.critical_active(channel, gate.partition_of(sluice_settings().channels[channel].gate, payload)):
            self.critical_seen = True
            self.give_back_after(index)
        try:
            self.slots.enter_context(gate.slot(channel, klass, payload, max_wait_s=tasks.gate_wait(message)))
            return True
        except gate.GateTimeout:
            return False

    def give_back_after(self, index):
        """Mark every message after ``index`` that has not started to go back to the queue."""
        for item in self.items[index + 1 :]:
            if item.fetched is not None and not item.started and item.outcome is None:
                item.given_back = True

    def flush(self):
        """Send every claimed send that waits, one send_many per channel; record each one's end."""
        pending, self.pending = self.pending, {}
        try:
            for channel, group in pending.items():
                self.send_group(channel, group)
        finally:
            self.slots.close()
            self.slots = ExitStack()

    def bulk(self, channel):
        """Does the channel's backend (every one of its providers') make one call for many messages?"""
        if channel not in self.bulk_channels:
            conf = sluice_settings().channels[channel]
            if conf.providers:
                backends = [get_provider(channel, provider.name) for provider in conf.providers]
            else:
                backends = [get_channel(channel)]
            self.bulk_channels[channel] = all(backend.supports_send_many for backend in backends)
        return self.bulk_channels[channel]

    def send_group(self, channel, group):
        conf = sluice_settings().channels[channel]
        if self.bulk(channel):
            self.send_bulk(channel, conf, group)
            return
        for item, message in group:
            self.send_bulk(channel, conf, [(item, message)], single=True)

    def send_bulk(self, channel, conf, group, single=False):
        """One call for the group's messages; then each message's own result and its end, recorded."""
        messages = [message for _item, message in group]
        started = time.perf_counter()
        try:
            if single:
                results = [_send_one(messages[0], conf)]
            elif conf.providers:
                results = providers.send_many(messages, conf)
            else:
                results = get_channel(channel).send_many(messages)
            if len(results) != len(messages):
                raise ValueError(f"send_many returned {len(results)} results for {len(messages)} messages")
        except Exception as exc:  # noqa: BLE001 - a bulk call that failed as a whole failed for each message
            results = [exc] * len(messages)
        seconds = time.perf_counter() - started
        for (item, message), result in zip(group, results, strict=True):
            status = "sent"
            if isinstance(result, expiry.Expired):
                status = "expired"
                item.expired.append(channel)
            elif isinstance(result, PermanentSendError):
                status = "rejected"
                # Kept at once, as a single send keeps it: whatever the rest of the batch then meets, this
                # channel's failure is in the dead letters, not only in memory.
                try:
                    tasks.keep(item.task, result.reason, result, [channel])
                except Reject as exc:
                    item.error = item.error or exc
            elif isinstance(result, BaseException):
                status = "failed"
                logger.warning(
                    "send %s on %s failed, %s: %s", message.id, channel, tasks.next_step(item.task), tasks._why(result)
                )
                item.failed.append((channel, result))
            tasks.record_end(message, status, seconds)

    def conclude(self, item):
        """End one message as a single send task would: keep, retry or requeue, and record how it ended."""
        task, channels = item.task, item.kwargs.get("channels")
        try:
            try:
                if item.error is not None:
                    logger.warning(
                        "send %s failed unexpectedly, %s",
                        item.kwargs.get("notification_id"),
                        tasks.next_step(task),
                        exc_info=item.error,
                    )
                    tasks.retry(task, item.error, tasks.backoff(task), channels)
                left = tasks.still_to_send(item.messages, item.stopped_at, item.failed, item.expired)
                if item.held_back is not None:
                    tasks.retry(task, item.held_back, item.held_back.expires_in_s, left)
                if item.gate_timeout:
                    # Back to the end of the queue (no retry counted), as a single send does.
                    tasks.republish_message(task, task.request.retries, 0, left)
                    raise Retry(exc=tasks.Retrying(gate.GateTimeout.__name__), when=0)
                tasks.conclude(task, item.kind_obj, item.expired, item.failed)
            except (Retry, Ignore, Reject):
                raise
            except Exception as exc:  # noqa: BLE001 - anything unexpected is retried, as tasks.run() does
                tasks.retry(task, exc, tasks.backoff(task), channels)
        except (Retry, Ignore, Reject) as exc:
            item.outcome = exc


tasks.batch_delivery = deliver_batch
