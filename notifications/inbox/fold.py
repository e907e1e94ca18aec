"""Write a send into the inbox: fold it into the user's unread item of the same kind and entity, or add a row, and
keep the user's inbox within SLUICE_INBOX["max_items"] (oldest read items pruned first).

A fold adds every event's count, but shows the newest event's payload, link and text by when each event happened
(Message.happened_at), whatever order the writes land in: an older event retried after a newer one folded in adds
to the count and leaves the newer text. A row keeps its payload and body within the bounds of inbox.bounds."""

import logging
from dataclasses import dataclass
from datetime import UTC, datetime

from django.contrib.auth import get_user_model
from django.db import DataError, IntegrityError, transaction
from django.db.models import Case, F, IntegerField, Value, When
from django.template.loader import select_template
from django.utils import timezone

from notifications.activity import record as activity
from notifications.inbox.models import InboxItem
from pipeline import activity_fields, metrics
from pipeline.conf import sluice_settings
from pipeline.text import single_line

from ..channels.base import PermanentSendError
from ..render import DEFAULT_DIGEST_TEMPLATE, DEFAULT_TEMPLATE, _render, recipient
from ..user_digest import link
from . import bounds

logger = logging.getLogger("sluice.inbox")


class Unstorable(PermanentSendError):
    """The database refused the item's values (a DataError: a NUL character PostgreSQL cannot store, a value out
    of range): the same event fails the same way on every retry, so it is dead-lettered at once."""

    reason = "inbox_unstorable"


@dataclass(frozen=True)
class Written:
    """What a send did to the inbox: its item, and whether it made the row (else it folded into it, or was a retry
    of a send already folded in)."""

    item: InboxItem
    created: bool
    repeated: bool = False


def write(message):
    """Fold ``message`` (a channels.base.Message) into the user's unread item of its kind and entity, or add one."""
    kind = sluice_settings().kinds[message.kind]
    for _attempt in range(3):
        try:
            with transaction.atomic():
                written = _fold_or_create(kind, message)
            break
        except IntegrityError:
            # Another worker created the unread row at the same moment (the unique constraint): fold into it.
            continue
        except DataError as exc:
            # The first line only: PostgreSQL's next lines quote the statement, and with it the event's text.
            detail = single_line((str(exc).splitlines() or [""])[0])[:120]
            raise Unstorable(f"the inbox's database cannot store this event (DataError: {detail})") from exc
    else:
        raise IntegrityError(f"inbox: could not write {message.kind} {message.entity_id!r} after three tries")
    if not written.repeated:
        metrics.count(metrics.inbox_items_field(message.kind, "created" if written.created else "folded"))
    return written


def _fold_or_create(kind, message):
    unread = InboxItem.objects.select_for_update().filter(
        user_id=message.user_id,
        kind=message.kind,
        entity_id=message.entity_id,
        read_at__isnull=True,
        archived_at__isnull=True,
    )
    item = unread.first()
    if item is not None and item.last_notification == message.id:
        return Written(item, created=False, repeated=True)  # a retried send, folded in already
    if item is None:
        if not get_user_model()._default_manager.filter(pk=message.user_id).exists():
            raise PermanentSendError("the user is gone")
        item = InboxItem(user_id=message.user_id, kind=message.kind, entity_id=message.entity_id)
    created = item.pk is None
    happened = _happened_at(message)
    if created:
        item.count = message.count
    else:
        # Added in the database, not in Python: two folds at once on a database without row locks (SQLite) still
        # add up.
        InboxItem.objects.filter(pk=item.pk).update(count=F("count") + message.count)
        item.refresh_from_db(fields=["count"])
    payload = item.payload
    if created or item.happened_at is None or happened >= item.happened_at:
        # The newest event so far: its payload, link and time. Rendered from the whole payload; the row keeps it
        # within its bound.
        payload = message.payload or {}
        item.payload = bounds.fitted(payload, sluice_settings().inbox.max_payload_bytes)
        item.url = _url(kind, message)
        item.happened_at = happened
    item.last_notification = message.id or ""
    item.title, item.body = render(kind, item, payload)
    # Never the count of a folded item: saved from memory it could undo a fold that came in meanwhile.
    changed = ["payload", "last_notification", "title", "body", "url", "happened_at", "updated_at"]
    item.save(update_fields=None if created else changed)
    if created:
        prune_over_bound(message.user_id)
    activity.write(
        message.user_id,
        activity_fields.INBOX_CREATED if created else activity_fields.INBOX_FOLDED,
        kind=message.kind,
        entity_id=message.entity_id,
        notification_id=message.id,
        klass=message.klass,
        channel=message.channel,
        fold_key=f"inbox:{item.pk}",
    )
    return Written(item, created=created)


def _happened_at(message):
    """When the message's event happened, as the row stores it; now when the message does not say."""
    if message.happened_at is None:
        return timezone.now()
    return datetime.fromtimestamp(float(message.happened_at), UTC)


def render(kind, item, payload=None):
    """(title, body) of an item: sluice/inbox/<kind>.txt, else the kind's own template (its digest template once
    several events folded in), with ``count`` the events it stands for and ``payload`` (the item's, unless given).
    The body keeps its first bounds.BODY_CHARS characters."""
    slug = kind.name.replace(".", "_")
    if item.count > 1:
        names = [f"sluice/inbox/{slug}.txt", kind.digest_template, DEFAULT_DIGEST_TEMPLATE]
    else:
        names = [f"sluice/inbox/{slug}.txt", kind.template, DEFAULT_TEMPLATE]
    context = {
        "kind": kind.name,
        "kind_title": str(kind.title),
        "entity_id": item.entity_id,
        "payload": item.payload if payload is None else payload,
        "count": item.count,
        "user": recipient(item.user_id),
    }
    title, _, body = _render(select_template(names), context).strip().partition("\n")
    return single_line(title)[:300], bounds.body(body.strip())


def _url(kind, message):
    item = {"entity_id": message.entity_id, "kind": message.kind}
    return link(kind.url, item, message.payload or {})[:500]


def prune_over_bound(user_id):
    """Delete the user's items past SLUICE_INBOX["max_items"]: read or archived ones first, oldest first, then the
    oldest unread. Return how many went."""
    limit = sluice_settings().inbox.max_items
    items = InboxItem.objects.filter(user_id=user_id)
    over = items.count() - limit
    if over <= 0:
        return 0
    unread = When(read_at__isnull=True, archived_at__isnull=True, then=Value(1))
    unread_last = Case(unread, default=Value(0), output_field=IntegerField())
    doomed = list(items.order_by(unread_last, F("updated_at").asc(), "id").values_list("pk", flat=True)[:over])
    deleted = InboxItem.objects.filter(pk__in=doomed).delete()[0]
    metrics.count(metrics.INBOX_PRUNED, deleted)
    return deleted
