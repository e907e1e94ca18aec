"""The send tasks, one per class: render an event and hand it to each of its channels once."""

import logging
import time

from notifications.conf import CLASSES, sluice_settings
from pipeline import gate, keys, metrics
from pipeline.celery import app
from pipeline.queues import send_task_name
from pipeline.signals import PUBLISHED_AT
from pipeline.store import script

from .channels import get_channel
from .channels.base import Message, PermanentSendError
from .render import render

logger = logging.getLogger("sluice.send")

# A claim outlives any single send attempt but expires no later than the broker's visibility
# timeout hands the message to another worker, so a crashed sender's claim never blocks a resend
# for longer than that: claim_ttl() caps it at the visibility timeout when that is shorter.
CLAIM_TTL_S = 120
# A "sent" mark must outlive any redelivery of its message: the visibility timeout (300 s), retry
# backoffs, a flusher's lease, time back in a queue. An hour covers them all; at 55 sends a second a
# week of marks would hold about 6 GB of Redis (bench soak measured 184 bytes a mark).
SENT_TTL_S = 3600
MAX_RETRIES = 5


def claim_ttl():
    """Seconds a send claim lives: CLAIM_TTL_S, or the broker's visibility timeout when that is shorter."""
    visibility = (app.conf.broker_transport_options or {}).get("visibility_timeout", CLAIM_TTL_S)
    return max(1, min(CLAIM_TTL_S, int(visibility)))


class ClaimedElsewhere(Exception):
    """Another worker holds the send claim, or died holding it and the claim has not expired."""


def deliver(task, notification_id, kind, user_id, entity_id, payload, count=1, **extra):
    """Render the event and send it on every channel of its kind, skipping channels already sent."""
    kind_obj = sluice_settings().kinds.get(kind)
    if kind_obj is None:
        # Settings changed between publish and send; failing loudly beats dropping quietly.
        raise LookupError(f"kind {kind!r} is no longer registered; notification {notification_id} not sent")
    context = {"kind": kind, "entity_id": entity_id, "payload": payload, "count": count, **extra}
    # A routine fold of several events is a digest; a background collapse shows only the latest state.
    subject, body = render(kind_obj, context, digest=count > 1 and kind_obj.klass == "routine")
    failed = []
    for channel in kind_obj.channels:
        message = Message(
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
        )
        try:
            send_once(message)
        except PermanentSendError as exc:
            logger.warning("send %s on %s failed for good: %s", notification_id, channel, exc)
        except ClaimedElsewhere as exc:
            raise task.retry(exc=exc, countdown=claim_ttl(), max_retries=MAX_RETRIES) from None
        except gate.GateTimeout as exc:
            # Back to the end of the queue at once (no ETA, no retry count): the worker takes other
            # channels' sends meanwhile, and the message keeps the time it was first published.
            headers = {PUBLISHED_AT: getattr(task.request, PUBLISHED_AT, None) or time.time()}
            raise task.retry(exc=exc, countdown=0, max_retries=None, headers=headers) from None
        except Exception as exc:  # noqa: BLE001 - any backend failure is retried, then reported
            failed.append((channel, exc))
    metrics.count(metrics.processed_field(kind_obj.klass))
    if failed:
        channel, exc = failed[0]
        logger.warning("send %s on %s failed, will retry: %s", notification_id, channel, exc)
        raise task.retry(exc=exc, countdown=min(2**task.request.retries, 60), max_retries=MAX_RETRIES)


def send_once(message):
    """Send ``message`` unless this notification already went out on this channel.

    The claim is atomic (claim_send.lua); a redelivered message finds "sent" and stops.
    """
    key = keys.sent(message.id, message.channel)
    previous = script("claim_send")(keys=[key], args=[claim_ttl()])
    if previous == b"sent":
        metrics.count(metrics.sent_field(message.channel, message.klass, "duplicate"))
        return False
    if previous == b"sending":
        # Another worker holds the claim (or died holding it): try again once it may have expired.
        raise ClaimedElsewhere(f"{message.id} on {message.channel} is being sent elsewhere")
    status, started = "failed", None
    try:
        with gate.slot(message.channel, message.klass, message.payload):
            started = time.perf_counter()
            get_channel(message.channel).send(message)
        status = "sent"
    except PermanentSendError:
        status = "rejected"
        raise
    finally:
        seconds = time.perf_counter() - started if started is not None else None
        metrics.finish_send(key, message.channel, message.klass, status, seconds, SENT_TTL_S)
    return True


def _register(klass):
    def send(self, **kwargs):
        return deliver(self, **kwargs)

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
