"""A scheduled send: one event for one user, kept until its time, then published once by the mover."""

from django.conf import settings
from django.db import models
from django.db.models import Q

PENDING, PUBLISHING = "pending", "publishing"
STATES = [(PENDING, "pending"), (PUBLISHING, "publishing")]


class ScheduledSend(models.Model):
    """A send of ``kind`` about ``entity_id`` to ``user`` at ``send_at``; ``key`` tells apart two of one kind and entity
    (a reminder a day before and one ten minutes before). At most one is pending per user, kind, entity and key:
    scheduling it again moves it. The mover takes it ("publishing", under a lease) at ``due_at`` (its reserved
    second, for a kind whose class reserves: at most its window before ``send_at``) and deletes it once published."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="sluice_scheduled_sends")
    kind = models.CharField(max_length=100)
    # The kind's class when it was scheduled: its mover publishes it.
    klass = models.CharField(max_length=20)
    entity_id = models.CharField(max_length=500)
    key = models.CharField(max_length=100, blank=True, default="")
    send_at = models.DateTimeField()
    due_at = models.DateTimeField()
    # Whether it holds a reserved second of its class's rate (due_at's).
    reserved = models.BooleanField(default=False)
    # The event's payload, as notify() validated it (JSON).
    payload = models.TextField(default="{}")
    # Each move adds one: the send it comes to is admitted once per version (its idempotency key and id).
    version = models.PositiveIntegerField(default=1)
    state = models.CharField(max_length=12, choices=STATES, default=PENDING)
    # The mover that took it, and until when: after that another mover takes it over.
    mover = models.CharField(max_length=32, blank=True, default="")
    lease_until = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        app_label = "sluice_notifications"
        ordering = ["due_at", "id"]
        verbose_name = "scheduled send"
        indexes = [
            models.Index(fields=["klass", "state", "due_at"], name="sluice_scheduled_due"),
            models.Index(fields=["kind", "entity_id"], name="sluice_scheduled_entity"),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["user", "kind", "entity_id", "key"],
                condition=Q(state=PENDING),
                name="sluice_scheduled_one_pending",
            )
        ]

    def __str__(self):
        return f"{self.kind} {self.entity_id} for user {self.user_id} at {self.send_at.isoformat()}"
