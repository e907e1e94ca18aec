"""A topic's subscriptions, and the fan-out jobs of notify_topic(): one row a subscriber, one row a call."""

from django.conf import settings
from django.db import models
from django.db.models import Q

from ..topic_names import MAX_TOPIC_LENGTH

FANNING, DONE, FAILED = "fanning", "done", "failed"
STATES = [(FANNING, "fanning out"), (DONE, "done"), (FAILED, "failed")]


class Subscription(models.Model):
    """``user`` is subscribed to ``topic``: each notify_topic() of the topic reaches them (their own choices apply)."""

    topic = models.CharField(max_length=MAX_TOPIC_LENGTH)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="sluice_topic_subscriptions"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        app_label = "sluice_notifications"
        ordering = ["topic", "id"]
        verbose_name = "topic subscription"
        constraints = [models.UniqueConstraint(fields=["topic", "user"], name="sluice_topic_one_subscription")]
        # A fan-out pages a topic's subscriptions by primary key (keyset pagination: WHERE topic = %s AND id > %s).
        indexes = [models.Index(fields=["topic", "id"], name="sluice_topic_page")]

    def __str__(self):
        return f"user {self.user_id} on {self.topic}"


class TopicFanout(models.Model):
    """One notify_topic() call: the event (validated when it was made), and how far its fan-out got. ``cursor`` is the
    last subscription done (the next step reads those after it); ``done`` and ``rejected`` count subscribers, and
    ``counts`` what became of them by outcome. Each subscriber's event carries an idempotency key of this job and that
    user, so a step killed mid-chunk and run again sends nobody twice."""

    topic = models.CharField(max_length=MAX_TOPIC_LENGTH)
    kind = models.CharField(max_length=100)
    # The kind's class when it was called: that class's pool fans it out.
    klass = models.CharField(max_length=20)
    entity_id = models.CharField(max_length=500)
    payload = models.TextField(default="{}")
    send_at = models.DateTimeField(null=True, blank=True)
    key = models.CharField(max_length=100, blank=True, default="")
    # The caller's idempotency key and its scope: a repeat of the call returns this job.
    scope = models.CharField(max_length=120)
    idempotency_key = models.CharField(max_length=255, blank=True, default="")
    # Random, so no two jobs share their subscribers' idempotency keys (a database reset reuses primary keys).
    token = models.CharField(max_length=32, unique=True)
    subscribers = models.PositiveIntegerField(default=0)
    cursor = models.BigIntegerField(default=0)
    done = models.PositiveIntegerField(default=0)
    rejected = models.PositiveIntegerField(default=0)
    counts = models.JSONField(default=dict, blank=True)
    state = models.CharField(max_length=10, choices=STATES, default=FANNING)
    error = models.CharField(max_length=500, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        app_label = "sluice_notifications"
        ordering = ["-id"]
        verbose_name = "topic fan-out"
        indexes = [models.Index(fields=["klass", "state", "id"], name="sluice_topic_fanning")]
        constraints = [
            models.UniqueConstraint(
                fields=["scope", "idempotency_key"],
                condition=~Q(idempotency_key=""),
                name="sluice_topic_fanout_once",
            )
        ]

    def __str__(self):
        return f"{self.kind} {self.entity_id} to {self.topic}"

    @property
    def left(self):
        """Subscribers still to do (of those at the start; a subscriber added meanwhile is reached too)."""
        return 0 if self.state != FANNING else max(0, self.subscribers - self.done)
