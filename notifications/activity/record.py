"""The activity log's steps that happen in the host's database (a scheduled send scheduled, moved or cancelled; an
inbox item created, read or escalated; a provider's later word), written as rows there directly, in the caller's own
transaction: no buffer to go through, and the row commits or rolls back with the step it records."""

import logging
import uuid

from django.db import DatabaseError, transaction
from django.utils import timezone

from pipeline import activity_fields
from pipeline.conf import sluice_settings

from .models import ActivityEntry

logger = logging.getLogger("sluice.activity")


def write(user_id, outcome, *, kind="", entity_id="", notification_id="", klass="", **fields):
    """Record one step for ``user_id`` now (``fields``: reason, detail, fold_key, title, channel, provider) while
    SLUICE_ACTIVITY is on; return the row, or None. Never raises for the log's sake: a step is never failed by it."""
    if not sluice_settings().activity.enabled:
        return None
    detail = str(fields.pop("detail", ""))[: activity_fields.DETAIL_MAX]
    try:
        # A savepoint: a failed insert leaves the caller's transaction usable.
        with transaction.atomic():
            return ActivityEntry.objects.create(
                user_id=user_id,
                outcome=outcome,
                kind=kind[:100],
                entity_id=str(entity_id)[:500],
                notification_id=str(notification_id)[:100],
                klass=klass,
                detail=detail,
                at=timezone.now(),
                source=f"db:{uuid.uuid4().hex}",
                **fields,
            )
    except DatabaseError as exc:
        # The step itself stands (its own writes are the caller's); only its line in the log is lost, and said so.
        logger.warning(
            "activity log: a %s step of user %s was not recorded (%s: %s)", outcome, user_id, type(exc).__name__, exc
        )
        return None


def write_many(rows):
    """Record many steps at once: ``rows`` are write()'s keyword arguments (user_id and outcome included)."""
    rows = list(rows)
    if not rows or not sluice_settings().activity.enabled:
        return
    now = timezone.now()
    entries = []
    for row in rows:
        row = dict(row)
        row["detail"] = str(row.get("detail", ""))[: activity_fields.DETAIL_MAX]
        entries.append(ActivityEntry(at=now, source=f"db:{uuid.uuid4().hex}", **row))
    ActivityEntry.objects.bulk_create(entries)
