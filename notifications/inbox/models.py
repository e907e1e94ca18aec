"""The inbox item (notifications.inbox): one row per user | kind | entity while unread, folding later events."""

from django.conf import settings
from django.db import models
from django.db.models import Q


class InboxItem(models.Model):
    """What a user sees in the inbox. While it is unread (and not archived), a new event of the same user, kind and
    entity folds into it (count, the newest event's payload, title, body and time) instead of adding a row."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="sluice_inbox_items")
    kind = models.CharField(max_length=100)
    entity_id = models.CharField(max_length=200, blank=True)
    title = models.CharField(max_length=300)
    body = models.TextField(blank=True)
    url = models.CharField(max_length=500, blank=True)
    payload = models.JSONField(default=dict, blank=True)
    # How many events it stands for: 1, or more once later events folded into it.
    count = models.PositiveIntegerField(default=1)
    # The last notification folded in: a send retried after the row was written folds nothing twice.
    last_notification = models.CharField(max_length=100, blank=True)
    # When the event whose payload (and link) it shows happened: a fold takes an event's payload only if it happened
    # at or after this, so an older event written late (a retry) adds to the count without bringing back older text.
    happened_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True, db_index=True)
    read_at = models.DateTimeField(null=True, blank=True)
    archived_at = models.DateTimeField(null=True, blank=True)
    # When it was escalated to the kind's escalation channels (once at most).
    escalated_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        app_label = "sluice_notifications"
        ordering = ["-id"]
        verbose_name = "inbox item"
        indexes = [models.Index(fields=["user", "read_at", "archived_at"], name="sluice_inbox_user_unread")]
        constraints = [
            # At most one unread row per user | kind | entity: the fold's target; two workers creating it at once
            # meet here, and the loser folds into the winner's row.
            models.UniqueConstraint(
                fields=["user", "kind", "entity_id"],
                condition=Q(read_at__isnull=True, archived_at__isnull=True),
                name="sluice_inbox_one_unread",
            )
        ]

    def __str__(self):
        return f"{self.kind} {self.entity_id} for user {self.user_id} (x{self.count})"

    @property
    def unread(self):
        return self.read_at is None and self.archived_at is None

    def as_json(self):
        """What the API and the bell show of it."""
        return {
            "id": self.pk,
            "kind": self.kind,
            "entity_id": self.entity_id,
            "title": self.title,
            "body": self.body,
            "url": self.url,
            "count": self.count,
            "created_at": self.created_at.isoformat(),
            "updated_at": self.updated_at.isoformat(),
            "happened_at": (self.happened_at or self.updated_at).isoformat(),
            "read": self.read_at is not None,
            "archived": self.archived_at is not None,
        }
