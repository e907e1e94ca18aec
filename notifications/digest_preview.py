"""Render a user's pending digest as the next flush would send it, for the admin: each message's channels, subject
and body, and when the digest is due."""

import json
from datetime import UTC, datetime

from digest import grouping
from digest.preview import pending_of
from pipeline.conf import sluice_settings

from . import user_digest
from .reader import Reader, reading
from .render import render


def preview(user_id):
    """{"next_due_at": datetime or None, "messages": [{"channels", "subject", "body", "count"}, ...]}."""
    conf = sluice_settings()
    groups, due = pending_of(user_id)
    reader = Reader(user_id)
    user = reader.user
    messages = []
    with reading(reader):
        _render_groups(groups, conf, user, messages)
    return {"next_due_at": datetime.fromtimestamp(due, UTC) if due else None, "messages": messages}


def _render_groups(groups, conf, user, messages):
    # In the user's language and zone, as the send renders them (notifications.delivery.messages).
    for group in groups:
        for part in grouping.plan(group, conf):
            if part.bucket is not None:
                digest = grouping.digest_of(part, conf.digest.max_items)
                rendered = user_digest.render(digest, user, conf.kinds)
                subject, body = rendered.subject, rendered.body
                channels = [part.channel]
            else:
                fold = part.folds[0]
                kind = conf.kinds.get(fold.kind)
                if kind is None:
                    continue  # its kind is no longer registered: the send dead-letters it
                subject, body = _single(fold, kind, user)
                channels = list(fold.channels or kind.channels)
            count = sum(f.count for f in part.folds)
            messages.append({"channels": channels, "subject": subject, "body": body, "count": count})


def _single(fold, kind, user):
    # As the send engine renders a fold's own message (notifications.delivery.messages.messages_of).
    context = {
        "kind": fold.kind,
        "entity_id": fold.entity_id or "",
        "payload": json.loads(fold.payload_json),
        "count": fold.count,
        "user": user,
        "grain": fold.grain,
        "entities": fold.entities,
        "kinds": fold.kinds,
    }
    digest = (fold.count > 1 and kind.klass == "routine") or fold.grain != "entity"
    return render(kind, context, digest=digest)
