"""The send tasks, one per class: render an event and hand it to each of its channels once.

No path out of a send task acks a message it did not handle. A send goes out, or the message is
retried (republished with backoff), put back at the end of its queue (its channel is busy), requeued
(a retry could not be published), or dead-lettered with its reason (pipeline.deadletters).
"""

import dataclasses
import logging
import math
import time

from celery.exceptions import Ignore, Reject, Retry
from redis.exceptions import RedisError

from pipeline import deadletters, gate, keys, marks, metrics
from pipeline.celery import app
from pipeline.conf import CLASSES, sluice_settings
from pipeline.message import CHANNELS_HEADER
from pipeline.queues import send_task_name
from pipeline.republish import republish
from pipeline.signals import PUBLISHED_AT
from pipeline.store import class_redis, script

from . import delivery, expiry, providers  # noqa: F401 - delivery registers its prune task with the app
from .channels import get_channel
from .channels.base import Message, PermanentSendError
from .render import recipient, render

logger = logging.getLogger("sluice.send")

# A claim outlives any single send attempt but expires no later than the broker's visibility
# timeout hands the message to another worker, so a crashed sender's claim never blocks a resend
# for longer than that: claim_ttl() caps it at the visibility timeout when that is shorter.
CLAIM_TTL_S = 120
# A "sent" mark lives as long as a redelivery of its message can come (pipeline.marks.lifetime_s: the
# visibility timeout, one unacked sweep and time back in the queue), in a hash of its time bucket.
MAX_RETRIES = 5
MAX_BACKOFF_S = 60
#: Sends a batch, as ``batch_delivery(task, kwargs, size)``: notifications.batch builds on this module's steps, so it
#: sets this itself when it is loaded (NotificationsConfig.ready), and this module never imports it.
batch_delivery = None


def claim_ttl():
    """Seconds a send claim lives: CLAIM_TTL_S, or the broker's visibility timeout when that is shorter."""
    visibility = (app.conf.broker_transport_options or {}).get("visibility_timeout", CLAIM_TTL_S)
    return max(1, min(CLAIM_TTL_S, int(visibility)))


class ClaimedElsewhere(Exception):
    """Another worker holds the send claim, or died holding it and the claim has not expired."""

    def __init__(self, message, expires_in_s):
        super().__init__(message)
        self.expires_in_s = expires_in_s


class Retrying(Exception):
    """What a retry tells Celery's events and Flower: the error's type, never its text, which may quote a
    provider's answer about the recipient."""


def deliver(task, notification_id, kind, user_id, entity_id, payload, count=1, channels=None, **extra):
    """Render the event and send it on every channel of its kind (or the ``channels`` still to send)."""
    kind_obj, messages = prepare(task, notification_id, kind, user_id, entity_id, payload, count, channels, **extra)
    failed, expired, counted = [], [], []
    processed = metrics.processed_field(kind_obj.klass)
    published_at = getattr(task.request, PUBLISHED_AT, None)
    for index, message in enumerate(messages):
        channel = message.channel
        if expiry.passed(message.expires_at):
            # Never sent late: a sign-in code that arrives after it expired is worse than none.
            expired.append(channel)
            continue
        try:
            # The last channel's end counts the message as processed in the same round trip.
            counting = (processed, counted) if message is messages[-1] else None
            send_once(message, published_at=published_at, count=counting)
        except expiry.Expired:
            expired.append(channel)
        except PermanentSendError as exc:
            # Kept at once, not at the end: a retry raised below would skip this channel as done.
            keep(task, exc.reason, exc, [channel])
        except ClaimedElsewhere as exc:
            # Try again once the claim has expired: a sender that died holding it frees it then.
            retry(task, exc, exc.expires_in_s, still_to_send(messages, index, failed, expired))
        except gate.GateTimeout as exc:
            # Back to the end of the queue at once (no ETA, no retry counted): the worker takes other
            # channels' sends meanwhile, and the message keeps the time it was first published.
            republish_message(task, task.request.retries, 0, still_to_send(messages, index, failed, expired))
            raise Retry(exc=Retrying(type(exc).__name__), when=0) from None
        except Exception as exc:  # noqa: BLE001 - any backend failure is retried, then dead-lettered
            logger.warning("send %s on %s failed, %s: %s", notification_id, channel, next_step(task), _why(exc))
            failed.append((channel, exc))
    conclude(task, kind_obj, expired, failed, counted=bool(counted))


def still_to_send(messages, index, failed, expired):
    """The channels a message goes back with when its attempt stops at ``messages[index]``: that one and those
    after it, and the ones that failed or expired before it. Not those already sent or dead-lettered: a "sent"
    mark outlives any redelivery (pipeline.marks), but a message that goes round its queue again and again (a
    rate-limited channel's gate) could outlive the marks of the channels it sent first."""
    return [channel for channel, _exc in failed] + list(expired) + [m.channel for m in messages[index:]]


def prepare(task, notification_id, kind, user_id, entity_id, payload, count=1, channels=None, **extra):
    """The event's kind and its rendered message for each channel still to send; dead-letters (raises Ignore) an
    event whose kind is no longer registered."""
    kind_obj = sluice_settings().kinds.get(kind)
    if kind_obj is None:
        # Settings changed between publish and send: kept for a replay once the kind is back.
        dead_letter(task, "unknown_kind", f"kind {kind!r} is no longer registered", channels)
    expires_at = expiry_of(task, kind_obj)
    extra.pop("expires_at", None)
    context = {"kind": kind, "entity_id": entity_id, "payload": payload, "count": count, "user": recipient(user_id)}
    context.update(extra)
    # A routine fold of several events is a digest; a background collapse shows only the latest state. A fold of
    # a coarser grain (user|kind, or the user) always reads as one, whatever the class.
    grain = extra.get("grain", "entity")
    subject, body = render(kind_obj, context, digest=(count > 1 and kind_obj.klass == "routine") or grain != "entity")
    messages = [
        Message(
            id=notification_id,
            channel=channel,
            kind=kind,
            klass=kind_obj.klass,
            user_id=user_id,
            entity_id=entity_id,
            subject=subject,
            body=body,
            payload=payload,
            count=count,
            first_seen=extra.get("first_seen"),
            expires_at=expires_at,
        )
        for channel in kind_obj.channels
        if channels is None or channel in channels
    ]
    return kind_obj, messages


def conclude(task, kind_obj, expired, failed, counted=False):
    """Count the message as processed (unless its last send's end did), keep its expired channels, and retry its
    failed ones (raises Retry)."""
    if not counted:
        metrics.count(metrics.processed_field(kind_obj.klass), klass=kind_obj.klass)
    if expired:
        keep(task, "expired", f"not sent by its expiry ({kind_obj.expires_after_s} s after the event)", expired)
    if failed:
        # A channel whose every provider's breaker is open says when it may send again; the retry waits for it.
        countdown = max([backoff(task)] + [getattr(exc, "retry_after_s", 0) for _channel, exc in failed])
        retry(task, failed[0][1], countdown, [channel for channel, _exc in failed])


def send_once(message, published_at=None, count=None):
    """Send ``message`` unless this notification already went out on this channel.

    The claim is atomic (claim_send.lua); a redelivered message finds "sent" and stops. ``published_at`` (when the
    message was first published) narrows the mark buckets looked in: its mark cannot be older. ``count`` is
    (counter field, list): the send's end adds one to that counter too, and appends to the list once it has.
    """
    if not claim(message, published_at):
        return False
    status, started, requeued = "failed", None, False
    try:
        with gate.slot(message.channel, message.klass, message.payload, max_wait_s=gate_wait(message)):
            started = time.perf_counter()
            conf = sluice_settings().channels[message.channel]
            message = dataclasses.replace(message, deadline=send_deadline(message))
            if conf.providers:
                providers.send(message, conf)
            else:
                get_channel(message.channel).send(message)
        status = "sent"
    except expiry.Expired:
        status = "expired"
        raise
    except PermanentSendError:
        status = "rejected"
        raise
    except gate.GateTimeout:
        requeued = True  # back to its queue: not processed yet
        raise
    finally:
        seconds = time.perf_counter() - started if started is not None else None
        also = count[0] if count and not requeued else ""
        if record_end(message, status, seconds, also_count=also) and also:
            count[1].append(also)
    return True


def claim(message, published_at=None):
    """Claim the send of ``message`` on its channel: True when this worker now owns it, False when it already went
    out (counted as a duplicate); raises ClaimedElsewhere while another worker holds the claim. ``published_at``
    (when the message was first published) narrows the mark buckets looked in: its mark cannot be older."""
    mark = marks.field(message.id, message.channel)
    previous, left_ms = script("claim_send", on=class_redis(message.klass))(
        keys=[keys.sent(message.id, message.channel), *marks.candidates(mark, since=published_at)],
        args=[claim_ttl(), mark],
    )
    if previous == b"sent":
        metrics.count(metrics.sent_field(message.channel, message.klass, "duplicate"), klass=message.klass)
        return False
    if previous == b"sending":
        expires_in_s = max(1, math.ceil(left_ms / 1000)) if left_ms > 0 else claim_ttl()
        raise ClaimedElsewhere(f"{message.id} on {message.channel} is being sent elsewhere", expires_in_s)
    return True


def record_end(message, status, seconds=None, also_count=""):
    """End a claimed send: mark it sent (or drop the claim so a retry may send) and count it, with one more
    counter field ``also_count`` in the same round trip. True when it was recorded."""
    mark = marks.field(message.id, message.channel)
    try:
        mark_key, expire_at = marks.write_target(mark)
        metrics.finish_send(
            keys.sent(message.id, message.channel),
            message.channel,
            message.klass,
            status,
            seconds,
            (mark_key, mark, expire_at),
            also_count=also_count,
        )
        return True
    except RedisError as exc:
        # After a send that went out, failing here would send it again; the claim expires by itself
        # (claim_ttl), which is the most a redelivery waits.
        logger.warning("send %s on %s: its end was not recorded: %s", message.id, message.channel, _why(exc))
        return False


def send_deadline(message):
    """When this attempt's send must be over (time.monotonic()): the class's send budget, within the claim's
    lifetime, or the message's expiry when that comes first."""
    budget = min(sluice_settings().queues[message.klass].send_budget_s, claim_ttl())
    deadline = time.monotonic() + budget
    if message.expires_at is not None:
        deadline = min(deadline, time.monotonic() + (message.expires_at - time.time()))
    return deadline


def gate_wait(message):
    """How long the send may wait for its channel's gate: the gate's own limit, or less when it expires sooner."""
    channel_gate = sluice_settings().channels[message.channel].gate
    if message.expires_at is None or channel_gate is None:
        return None
    limit = gate.CRITICAL_MAX_WAIT_S if message.klass == "critical" else channel_gate.max_wait_ms / 1000
    return max(0.0, min(limit, message.expires_at - time.time()))


def expiry_of(task, kind_obj):
    """When this task's message expires (seconds since the epoch), or None."""
    return expiry.expires_at(kind_obj, task.request.kwargs or {}, getattr(task.request, PUBLISHED_AT, None))


def backoff(task):
    """Seconds before the next attempt: 1, 2, 4 ... up to MAX_BACKOFF_S."""
    return min(2**task.request.retries, MAX_BACKOFF_S)


def next_step(task):
    """What follows a failed attempt, for its log line: another attempt, or the dead letters after the last one
    (retry() decides; a retry that would come after the message's expiry is dead-lettered too, and logged so)."""
    if task.request.retries >= MAX_RETRIES:
        return f"dead-lettered after {task.request.retries + 1} attempts"
    return "will retry"


def retry(task, exc, countdown, channels=None):
    """Retry in ``countdown`` seconds, or dead-letter once MAX_RETRIES attempts have failed or the retry would come
    after the message expires. Always raises."""
    expires_at = expiry_of(task, sluice_settings().kinds.get(task.request.kwargs.get("kind")))
    if expires_at is not None and time.time() + countdown >= expires_at:
        dead_letter(task, "expired", f"its next attempt would come after its expiry ({_why(exc)})", channels)
    if task.request.retries >= MAX_RETRIES:
        dead_letter(task, "retries_exhausted", exc, channels)
    republish_message(task, task.request.retries + 1, countdown, channels)
    raise Retry(exc=Retrying(type(exc).__name__), when=countdown) from None


def republish_message(task, retries, countdown, channels):
    """Publish this message again; when that fails (the queue at its ceiling, Redis down) requeue the original."""
    kwargs = dict(task.request.kwargs)
    if channels is not None:
        kwargs["channels"] = list(channels)
    try:
        republish(
            class_of(task),
            task.request.id,
            kwargs,
            published_at=getattr(task.request, PUBLISHED_AT, None) or time.time(),
            retries=retries,
            countdown=countdown,
        )
    except Exception as exc:  # noqa: BLE001 - whatever kept the retry out, the original must not be dropped
        raise Reject(f"retry not published ({_why(exc)}); the message is requeued", requeue=True) from None


def dead_letter(task, reason, error, channels=None):
    """Keep the message in the dead letters and ack it (raises Ignore); requeue it when that fails."""
    keep(task, reason, error, channels)
    raise Ignore()


def keep(task, reason, error, channels):
    """Add the message to the dead letters, or requeue it when they cannot be written."""
    try:
        letter = deadletters.add(
            task.name, class_of(task), dict(task.request.kwargs), reason, error, task.request.retries + 1, channels
        )
    except Exception as exc:  # noqa: BLE001 - not kept means not handled: the original goes back
        raise Reject(f"dead letter not written ({_why(exc)}); the message is requeued", requeue=True) from None
    logger.warning("notification %s dead-lettered (%s): %s", letter.notification_id, reason, letter.error)


def class_of(task):
    """The class of a send task, from its name (sluice.send.<class>)."""
    return task.name.rsplit(".", 1)[-1]


def _why(exc):
    return f"{type(exc).__name__}: {exc}"


def run(task, kwargs):
    """The body of every send task: deliver, and turn anything unexpected into a retry."""
    restricted = getattr(task.request, CHANNELS_HEADER, None)
    if restricted is not None and "channels" not in kwargs:
        # Admission restricted the channels (the user turned some off): a retry carries it in its kwargs.
        kwargs = {**kwargs, "channels": list(restricted)}
        task.request.kwargs = kwargs
    try:
        size = sluice_settings().queues[class_of(task)].batch
        if size > 1:
            if batch_delivery is None:
                raise RuntimeError("notifications.batch is not loaded (NotificationsConfig.ready loads it)")
            batch_delivery(task, kwargs, size)
        else:
            deliver(task, **kwargs)
    except (Retry, Reject, Ignore):
        raise
    except Exception as exc:
        logger.warning("send %s failed unexpectedly, %s", kwargs.get("notification_id"), next_step(task), exc_info=True)
        retry(task, exc, backoff(task), kwargs.get("channels"))


def _register(klass):
    def send(self, **kwargs):
        return run(self, kwargs)

    send.__name__ = f"send_{klass}"
    return app.task(
        send,
        name=send_task_name(klass),
        bind=True,
        # Acked after the send: a worker that dies mid-send leaves the message to be redelivered,
        # and send_once makes the redelivery harmless. On Redis an early ack saves no round trip.
        acks_late=True,
        # Only critical runs in prefork children; a child lost mid-send requeues its message.
        reject_on_worker_lost=klass == "critical",
        ignore_result=True,
    )


send_tasks = {klass: _register(klass) for klass in CLASSES}
