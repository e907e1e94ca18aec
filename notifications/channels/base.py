"""The contract every delivery channel backend fulfils, and the message it is given."""

import time
from dataclasses import dataclass, field

# The errors a backend raises: the send engine decides each message's end by them (pipeline.sending.results).
from pipeline.sending.results import PermanentSendError, SendError, TransientSendError

__all__ = [
    "Accepted",
    "BaseChannel",
    "DigestItem",
    "Message",
    "PermanentSendError",
    "SendError",
    "SuppressedRecipient",
    "TransientSendError",
    "accepted",
]


@dataclass(frozen=True)
class DigestItem:
    """One thing a user's digest lists, as data: a backend builds its own text or blocks from it ("12 updates on
    Quarterly report")."""

    kind: str
    entity_id: str
    # The events it stands for.
    count: int
    # What people read for it: its latest payload's ``title``, else its entity id; "" for a coarser grain's line.
    title: str
    # The kind's ``url`` filled from the item ("" for none).
    url: str
    # The latest event's payload ({} when the digest's payload budget ran out).
    payload: dict = field(default_factory=dict)
    # When its first and latest events happened (seconds since the epoch).
    first_seen: float | None = None
    last_seen: float | None = None
    # "entity" (one entity's events), or "kind" / "user" when the fold store folded coarser under pressure.
    grain: str = "entity"


@dataclass(frozen=True)
class Message:
    """One rendered notification for one channel.

    ``id`` is the notification id (a digest's id for digests). It is stable across redeliveries,
    so a backend whose provider takes an idempotency key should pass it.
    """

    id: str
    channel: str
    kind: str
    klass: str
    user_id: object
    entity_id: str
    subject: str
    body: str
    payload: dict = field(default_factory=dict)
    count: int = 1
    # For a digest: when its oldest folded event happened (seconds since the epoch).
    first_seen: float | None = None
    # When the event whose payload it carries happened (seconds since the epoch): a single event's first publish
    # (a retry keeps it), a fold's latest event. None when unknown. The inbox keeps the newest payload by it.
    happened_at: float | None = None
    # When the send must be over (time.monotonic()): the class's send budget, or the kind's expiry if sooner.
    # A backend never waits on its provider past it.
    deadline: float | None = None
    # When the message expires (seconds since the epoch), for kinds with ``expires_after_s``.
    expires_at: float | None = None
    # An HTML alternative of ``body``, in the email layout with its CSS inlined, for a backend whose class says
    # ``sends_html``; "" for none. A channel that sends HTML sends both.
    html: str = ""
    # The one-click unsubscribe link (RFC 8058) that turns this message's kind (a digest: its kinds) off on this
    # channel for this user; "" for a mandatory kind, or while SLUICE_SITE_URL is unset. The email backends send it
    # as List-Unsubscribe and List-Unsubscribe-Post; another backend may show it.
    unsubscribe_url: str = ""
    # A user digest's listed items, as data (DigestItem); () for any other message.
    items: tuple = ()
    # The language it was rendered in (SLUICE_USER_LANGUAGE, else LANGUAGE_CODE): what a backend that renders more
    # text itself (the inbox) renders under.
    language: str = ""

    def time_left(self, cap):
        """Seconds a backend may still wait on its provider: ``cap``, or less when the deadline is nearer."""
        if self.deadline is None:
            return cap
        return max(0.0, min(cap, self.deadline - time.monotonic()))


@dataclass(frozen=True)
class Accepted:
    """What send() may return instead of a bare id: the provider's id for the message, and the address it went to.
    The delivery record keeps the address: a bounce or a complaint suppresses an address only when it names the
    one the send went to."""

    message_id: str | None = None
    recipient: str = ""


def accepted(answer):
    """(provider's id or None, recipient or "") from what send() returned: an Accepted, an id, or None."""
    if isinstance(answer, Accepted):
        return answer.message_id, answer.recipient
    return answer, ""


class SuppressedRecipient(PermanentSendError):
    """The address is on the suppression list (a hard bounce or a complaint): sending again harms the sender."""

    reason = "suppressed"


class BaseChannel:
    """Subclasses implement send(message), and may implement send_many(messages) for a provider's bulk call.

    send() returns once the provider accepted the message, or raises: TransientSendError to be
    retried, PermanentSendError to give up. Any other exception counts as transient. It may return
    the provider's id for the message, which delivery status callbacks refer to, or an Accepted
    that also names the address the message went to (the email channels do). It never waits on
    the provider past ``message.deadline`` (see Message.time_left). A backend is built once per
    worker process and may be called from several threads at once.
    """

    #: Whether this backend sends HTML email: its messages then get ``html`` (the email layout) and a body with the
    #: email's footer (the preference and unsubscribe links). The email backends say True.
    sends_html = False

    def __init__(self, name, **options):
        self.name = name
        self.options = options

    def send(self, message):
        """Deliver ``message`` or raise a SendError; return the provider's message id, or None."""
        raise NotImplementedError(f"{type(self).__name__} must implement send()")

    @property
    def supports_send_many(self):
        """True when send_many() is one call to the provider (a bulk API); false for the default, which loops
        send(). A batch sends one message at a time, and records each one's end at once, through a backend
        without it: a worker killed mid-batch then resends at most the send it was in."""
        return type(self).send_many is not BaseChannel.send_many

    def send_many(self, messages):
        """Deliver several messages of this channel; return one result per message, in order: the provider's id
        (or None) for a message it accepted, or the exception that message's send raised.

        A backend whose provider has a bulk call (an FCM-style multicast, a bulk email API) overrides this to make
        one call for all of them; it reports each message's own outcome, never one for the whole call. This default
        sends them one at a time. It never waits past a message's deadline, like send().
        """
        results = []
        for message in messages:
            try:
                results.append(self.send(message))
            except Exception as exc:  # noqa: BLE001 - each message's failure is its own result
                results.append(exc)
        return results
