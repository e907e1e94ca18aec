"""A send's messages: its event rendered for each channel still to send, as the send engine asks for them.

The engine (pipeline.sending.engine) hands each message it takes to ``messages_of()``; a routine fold of several
events reads as a digest, a background collapse as the latest state, and a user's digest renders with its own
templates.
"""

from notifications import user_digest
from notifications.channels.base import Message
from notifications.render import recipient, render
from pipeline.conf import sluice_settings
from pipeline.sending import endings


def messages_of(attempt):
    """The event's kind and its rendered message for each channel still to send; dead-letters (raises Ended) an
    event whose kind is no longer registered."""
    kwargs = attempt.kwargs
    kind, channels = kwargs.get("kind"), kwargs.get("channels")
    kind_obj = sluice_settings().kinds.get(kind)
    if kind_obj is None:
        # Settings changed between publish and send: kept for a replay once the kind is back.
        endings.dead_letter(attempt, "unknown_kind", f"kind {kind!r} is no longer registered", channels)
    expires_at = attempt.expires_at(kind_obj)
    entity_id, payload, count = kwargs.get("entity_id"), kwargs.get("payload"), kwargs.get("count", 1)
    user_id = kwargs.get("user_id")
    extra = {k: v for k, v in kwargs.items() if k not in _SEND_ARGS}
    context = {"kind": kind, "entity_id": entity_id, "payload": payload, "count": count, "user": recipient(user_id)}
    context.update(extra)
    # A routine fold of several events is a digest; a background collapse shows only the latest state. A fold of
    # a coarser grain (user|kind, or the user) always reads as one, whatever the class.
    grain = extra.get("grain", "entity")
    html = ""
    if "digest" in extra:
        # One digest per user (digest.grouping): its listed folds render with sluice/digest/user.txt and user.html.
        subject, body, html = user_digest.render(extra["digest"], context["user"], sluice_settings().kinds)
    else:
        digest = (count > 1 and kind_obj.klass == "routine") or grain != "entity"
        subject, body = render(kind_obj, context, digest=digest)
    messages = [
        Message(
            id=kwargs.get("notification_id"),
            channel=channel,
            kind=kind,
            klass=kind_obj.klass,
            user_id=user_id,
            entity_id=entity_id,
            subject=subject,
            body=body,
            html=html,
            payload=payload,
            count=count,
            first_seen=extra.get("first_seen"),
            # A fold carries its latest event's payload, stamped last_seen; a single event, its first publish.
            happened_at=extra.get("last_seen") or attempt.published_at,
            expires_at=expires_at,
        )
        for channel in channels_of(kind_obj, channels)
    ]
    return kind_obj, messages


def channels_of(kind, channels):
    """The channels to send on: the kind's (those named in ``channels`` only, when given), and an inbox
    escalation's channels (notifications.inbox.escalation) when ``channels`` names them."""
    if channels is None:
        return kind.channels
    escalation = kind.escalate[1] if kind.escalate else ()
    return [channel for channel in dict.fromkeys((*kind.channels, *escalation)) if channel in channels]


# A send task's own arguments; any other is context for its template (a digest's grain, first_seen ...).
_SEND_ARGS = ("notification_id", "kind", "user_id", "entity_id", "payload", "count", "channels", "expires_at")
