"""A send's messages: its event rendered for each channel still to send, as the send engine asks for them.

The engine (pipeline.sending.engine) hands each message it takes to ``messages_of()``; a routine fold of several
events reads as a digest, a background collapse as the latest state, and a user's digest renders with its own
templates. Everything renders in the recipient's language and time zone (notifications.reader). A channel whose
backend sends HTML email gets the email layout (notifications.email_layout): its text with a footer, and HTML.
Every message of a kind that is not mandatory carries its one-click unsubscribe link (notifications.
unsubscribe_links).
"""

import dataclasses

from notifications import email_layout, unsubscribe_links, user_digest
from notifications.channels import sends_html
from notifications.channels.base import Message
from notifications.reader import Reader, reading
from notifications.render import render
from pipeline.conf import sluice_settings
from pipeline.sending import endings


def messages_of(attempt):
    """The event's kind and its rendered message for each channel still to send; dead-letters (raises Ended) an
    event whose kind is no longer registered."""
    kwargs = attempt.kwargs
    kind, channels = kwargs.get("kind"), kwargs.get("channels")
    conf = sluice_settings()
    kind_obj = conf.kinds.get(kind)
    if kind_obj is None:
        # Settings changed between publish and send: kept for a replay once the kind is back.
        endings.dead_letter(attempt, "unknown_kind", f"kind {kind!r} is no longer registered", channels)
    expires_at = attempt.expires_at(kind_obj)
    entity_id, payload, count = kwargs.get("entity_id"), kwargs.get("payload"), kwargs.get("count", 1)
    user_id = kwargs.get("user_id")
    extra = {k: v for k, v in kwargs.items() if k not in _SEND_ARGS}
    reader = Reader(user_id)
    context = {"kind": kind, "entity_id": entity_id, "payload": payload, "count": count, "user": reader.user}
    context.update(extra)
    # A routine fold of several events is a digest; a background collapse shows only the latest state. A fold of
    # a coarser grain (user|kind, or the user) always reads as one, whatever the class.
    grain = extra.get("grain", "entity")
    with reading(reader):
        if "digest" in extra:
            # One digest per user (digest.grouping): its listed folds render with sluice/digest/user.txt and user.html.
            digest = user_digest.render(extra["digest"], reader.user, conf.kinds)
            subject, body, items, about = digest.subject, digest.body, digest.items, digest.kinds
            html_names, html_context = (user_digest.HTML_TEMPLATE,), digest.context
        else:
            folded = (count > 1 and kind_obj.klass == "routine") or grain != "entity"
            subject, body = render(kind_obj, context, digest=folded)
            items, about = (), (kind_obj,)
            html_names = email_layout.message_templates(kind_obj)
            html_context = {**context, "kind_title": str(kind_obj.title), "url": _entity_url(kind_obj, context)}
        shared = {"subject": subject, "body": body, "items": items, "language": reader.language}
        messages = [
            _for_channel(
                Message(
                    id=kwargs.get("notification_id"),
                    channel=channel,
                    kind=kind,
                    klass=kind_obj.klass,
                    user_id=user_id,
                    entity_id=entity_id,
                    payload=payload,
                    count=count,
                    first_seen=extra.get("first_seen"),
                    # A fold carries its latest event's payload, stamped last_seen; a single event, its first publish.
                    happened_at=extra.get("last_seen") or attempt.published_at,
                    expires_at=expires_at,
                    unsubscribe_url=unsubscribe_links.url(user_id, channel, unsubscribe_links.scopes(about, channel)),
                    **shared,
                ),
                about,
                html_names,
                html_context,
                digest="digest" in extra,
            )
            for channel in channels_of(kind_obj, channels)
        ]
    return kind_obj, messages


def _for_channel(message, about, html_names, html_context, digest):
    """``message`` as its channel takes it: for a backend that sends HTML email, its text with the email's footer and
    its HTML in the layout."""
    if not sends_html(message.channel):
        return message
    layout = email_layout.layout_context(message.subject, about, message.unsubscribe_url, digest=digest)
    email = email_layout.render(message.body, html_names, {**html_context, **layout})
    return dataclasses.replace(message, body=email.text, html=email.html)


def _entity_url(kind, context):
    """The kind's link to the event's entity, absolute ("" for none)."""
    item = {"entity_id": context.get("entity_id"), "kind": kind.name}
    return user_digest.absolute(user_digest.link(kind.url, item, context.get("payload") or {}))


def channels_of(kind, channels):
    """The channels to send on: the kind's (those named in ``channels`` only, when given), and an inbox
    escalation's channels (notifications.inbox.escalation) when ``channels`` names them."""
    if channels is None:
        return kind.channels
    escalation = kind.escalate[1] if kind.escalate else ()
    return [channel for channel in dict.fromkeys((*kind.channels, *escalation)) if channel in channels]


# A send task's own arguments; any other is context for its template (a digest's grain, first_seen ...).
_SEND_ARGS = ("notification_id", "kind", "user_id", "entity_id", "payload", "count", "channels", "expires_at")
