"""The body of every send task: hand its message to the send engine, with more of its queue when its class sends in
batches, and answer Celery with how its own message ended.

No path out of a send task acks a message it did not handle. A send goes out, or the message is retried
(republished with backoff), put back at the end of its queue (its channel is busy), requeued (a retry could not be
published), or dead-lettered with its reason (pipeline.broker.deadletters). A message a batch took is acked or given
back on its own (pipeline.broker.batch_fetch).
"""

import logging

from celery.exceptions import Ignore, Reject, Retry

from pipeline.broker import batch_fetch
from pipeline.broker.message import CHANNELS_HEADER, read_send_message
from pipeline.broker.publish_stamp import PUBLISHED_AT
from pipeline.conf import sluice_settings
from pipeline.connections import in_partition, route
from pipeline.sending import endings

from .engine import Batch, Item

logger = logging.getLogger("sluice.batch")


class Retrying(Exception):
    """What a retry tells Celery's events and Flower: the error's type, never its text, which may quote a
    provider's answer about the recipient."""


def run(delivery, task, kwargs):
    """The body of every send task: send its message (and a batch's more) through ``delivery`` (rendering and
    providers: pipeline.sending.engine), and answer Celery for its own."""
    restricted = getattr(task.request, CHANNELS_HEADER, None)
    if restricted is not None and "channels" not in kwargs:
        # Admission restricted the channels (the user turned some off): a retry carries it in its kwargs.
        kwargs = {**kwargs, "channels": list(restricted)}
    attempt = endings.Attempt(
        task.name, task.request.id, kwargs, task.request.retries or 0, getattr(task.request, PUBLISHED_AT, None)
    )
    # On a Redis Cluster everything this send writes (its claim, mark, counters, log) goes to its queue's partition.
    with in_partition((task.request.delivery_info or {}).get("routing_key")):
        try:
            size = sluice_settings().queues[attempt.klass].batch
            ending = send_batch(delivery, attempt, size) if size > 1 else Batch(delivery, [Item(attempt)]).run()
        except Exception as exc:  # noqa: BLE001 - anything unexpected is retried
            ending = endings.unexpected(attempt, exc)
    answer(ending)


def answer(ending):
    """Tell Celery how the task's own message ended: return (acked), or raise Retry, Ignore or Reject."""
    if ending.result == endings.RETRIED:
        raise Retry(exc=Retrying(ending.error), when=ending.countdown)
    if ending.result == endings.DEAD_LETTERED:
        raise Ignore()
    if ending.result == endings.REQUEUED:
        raise Reject(ending.error, requeue=True)


def send_batch(delivery, attempt, size):
    """Send the task's own message together with up to ``size - 1`` more of its queue, taken through the reliable
    fetch; ack or give back each taken message. Return the task's own message's Ending."""
    consumer = batch_fetch.consumer()
    queue = route(attempt.klass).queue  # on a Redis Cluster, the partition whose message this task has
    size = min(size, 1 + batch_fetch.share_of_margin(queue, attempt.klass))

    def take():
        items, unbatchable = [], []
        for source, raw in consumer.take(queue.name, size - 1):
            item = _item_of(attempt.task_name, source, raw)
            if item is None:
                unbatchable.append((source, raw))
            else:
                items.append(item)
        if unbatchable:
            # Another task's message, or a retry due later: a worker takes it next, as a message of its own.
            consumer.give_back(unbatchable)
        return items

    batch = Batch(delivery, [Item(attempt)], take=take, alive=consumer.alive)
    try:
        ending = batch.run()
    except BaseException:
        # Not expected: whatever the batch took and did not end goes back; the task's own message is retried.
        end_or_retire(consumer, _give_back, [item for item in batch.items[1:] if item.ending is None])
        raise
    end_or_retire(consumer, _end_taken, batch.items[1:])
    logger.info("batch (%s): %s", attempt.klass, batch.summary())
    return ending


def end_or_retire(consumer, end, items):
    """End the taken messages with ``end`` and take the consumer out of the reaper's registry; when that fails (Redis
    went away), retire this batch consumer: it stops saying it is alive, so a reaper puts back what it still holds,
    and this thread's next batch takes under a new identity. Without that, the next batch's heartbeat would keep
    those messages held forever."""
    try:
        end(consumer, items)
        consumer.release()
    except BaseException:
        batch_fetch.retire(consumer)
        raise


def _end_taken(consumer, taken):
    """Ack every taken message that ended here; give back the ones that must be requeued or were not started."""
    back = [item for item in taken if item.given_back or item.ending.result == endings.REQUEUED]
    consumer.ack([item.fetched for item in taken if item not in back])
    _give_back(consumer, back)


def _give_back(consumer, items):
    if items:
        back = consumer.give_back([item.fetched for item in items])
        logger.info("batch gave back %d of %d messages it did not start", back, len(items))


def _item_of(task_name, source, raw):
    """The batch item of a taken message, or None when this batch must not handle it (another task's message, a
    retry due later, or one that cannot be read: the task's own path dead-letters that, pipeline.broker.transport)."""
    read = read_send_message(raw)
    if read is None or read.task != task_name or read.eta is not None:
        return None
    kwargs = read.kwargs
    if read.channels is not None and "channels" not in kwargs:
        kwargs = {**kwargs, "channels": list(read.channels)}
    attempt = endings.Attempt(task_name, read.id, kwargs, read.retries, read.published_at)
    return Item(attempt, fetched=(source, raw))
