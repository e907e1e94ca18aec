"""An entry of the activity log: one step of one notification for one user, as the drain stores it."""

from django.conf import settings
from django.db import models


class ActivityEntry(models.Model):
    """One step (``outcome``, with its ``reason`` and ``detail``) of notification ``notification_id`` for ``user``, at
    ``at``. ``source`` is where it came from (the class's Redis and its stream id, or the database's own step), unique,
    so a batch drained twice is stored once. Deleting a user deletes their log."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="sluice_activity")
    kind = models.CharField(max_length=100, blank=True, default="")
    entity_id = models.CharField(max_length=500, blank=True, default="")
    notification_id = models.CharField(max_length=100, db_index=True)
    klass = models.CharField(max_length=20, blank=True, default="")
    outcome = models.CharField(max_length=20)
    reason = models.CharField(max_length=100, blank=True, default="")
    detail = models.TextField(blank=True, default="")
    # The fold key an event went into, or the fold keys a digest carried (a JSON list).
    fold_key = models.TextField(blank=True, default="")
    title = models.CharField(max_length=200, blank=True, default="")
    channel = models.CharField(max_length=100, blank=True, default="")
    provider = models.CharField(max_length=100, blank=True, default="")
    at = models.DateTimeField()
    source = models.CharField(max_length=80, unique=True)

    class Meta:
        app_label = "sluice_notifications"
        ordering = ["-at", "-id"]
        verbose_name = "activity entry"
        verbose_name_plural = "activity log"
        indexes = [models.Index(fields=["user", "at"], name="sluice_activity_user_at")]
        permissions = [("view_activity", "Can view the notifications activity log")]

    def __str__(self):
        return f"{self.outcome} {self.kind} {self.notification_id} for user {self.user_id}"
