"""The send tasks, one per class: each hands its message to the send engine (pipeline.sending) with what the engine
does not know: how a message renders for each channel (notifications.delivery.messages) and which provider carries it
(notifications.delivery.failover).
"""

from notifications.delivery import failover, messages, records  # noqa: F401 - delivery declares its prune task
from pipeline.broker.queues import send_task_name
from pipeline.celery import task
from pipeline.conf import CLASSES
from pipeline.sending import send_task


class Delivery:
    """The face's part of a send, handed to the engine (pipeline.sending.engine says what each method answers)."""

    messages = staticmethod(messages.messages_of)
    bulk = staticmethod(failover.sends_in_bulk)
    send = staticmethod(failover.send)


DELIVERY = Delivery()


def _register(klass):
    def send(self, **kwargs):
        return send_task.run(DELIVERY, self, kwargs)

    send.__name__ = f"send_{klass}"
    return task(
        name=send_task_name(klass),
        bind=True,
        # Acked after the send: a worker that dies mid-send leaves the message to be redelivered,
        # and the send claim makes the redelivery harmless. On Redis an early ack saves no round trip.
        acks_late=True,
        # Only critical runs in prefork children; a child lost mid-send requeues its message.
        reject_on_worker_lost=klass == "critical",
        ignore_result=True,
    )(send)


send_tasks = {klass: _register(klass) for klass in CLASSES}
