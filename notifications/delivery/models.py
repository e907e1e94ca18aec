"""Where sent messages got to: delivery status records, suppressed addresses, and the providers' admin page."""

from django.conf import settings
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _


class DeliveryStatus(models.TextChoices):
    """Where a sent message got to, as its provider reported it; a record only moves forward (see RANK)."""

    SENT = "sent", _("sent")
    DELIVERED = "delivered", _("delivered")
    FAILED = "failed", _("failed")
    BOUNCED = "bounced", _("bounced")
    COMPLAINED = "complained", _("complained")


#: A later report never moves a record back: a "delivered" that arrives after the bounce does not undo it.
RANK = {"sent": 0, "delivered": 1, "failed": 2, "bounced": 2, "complained": 3}


class Delivery(models.Model):
    """The status of one notification on one channel: which provider accepted it, under which id, and what the
    provider reported since. Kept SLUICE_DELIVERY_RETENTION_DAYS after the send (pruned by beat)."""

    notification_id = models.CharField(_("notification"), max_length=64)
    channel = models.CharField(_("channel"), max_length=50)
    provider = models.CharField(_("provider"), max_length=50)
    provider_message_id = models.CharField(_("provider's message id"), max_length=255, blank=True, default="")
    # No database constraint: a worker records a send without waiting on the user's row (a transaction that
    # has not committed it yet would block the insert); deleting a user still deletes its records.
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        db_constraint=False,
        related_name="+",
        verbose_name=_("user"),
    )
    kind = models.CharField(_("kind"), max_length=100, blank=True, default="")
    recipient = models.CharField(_("recipient"), max_length=254, blank=True, default="")
    status = models.CharField(_("status"), max_length=20, choices=DeliveryStatus.choices, default="sent")
    detail = models.CharField(_("detail"), max_length=300, blank=True, default="")
    sent_at = models.DateTimeField(_("sent"), default=timezone.now, db_index=True)
    delivered_at = models.DateTimeField(_("delivered"), null=True, blank=True)
    opened_at = models.DateTimeField(_("opened"), null=True, blank=True)
    updated_at = models.DateTimeField(_("updated"), auto_now=True)

    class Meta:
        verbose_name = _("delivery status")
        verbose_name_plural = _("delivery statuses")
        ordering = ("-sent_at",)
        default_permissions = ("view", "delete")
        constraints = [
            models.UniqueConstraint(fields=["notification_id", "channel"], name="delivery_notification_channel")
        ]
        indexes = [
            models.Index(fields=["provider_message_id"], name="delivery_provider_message"),
            models.Index(fields=["status", "sent_at"], name="delivery_status_sent"),
        ]

    def __str__(self):
        return f"{self.notification_id} / {self.channel}: {self.status}"


class Suppression(models.Model):
    """An email address Sluice no longer sends to: it bounced hard, or its owner reported a message as spam."""

    address = models.CharField(_("address"), max_length=254, unique=True)
    reason = models.CharField(_("reason"), max_length=20)
    provider = models.CharField(_("reported by"), max_length=50, blank=True, default="")
    notification_id = models.CharField(_("notification"), max_length=64, blank=True, default="")
    detail = models.CharField(_("detail"), max_length=300, blank=True, default="")
    created_at = models.DateTimeField(_("suppressed"), auto_now_add=True)

    class Meta:
        verbose_name = _("suppressed address")
        verbose_name_plural = _("suppressed addresses")
        ordering = ("-created_at",)
        default_permissions = ("view", "delete")

    def __str__(self):
        return f"{self.address} ({self.reason})"

    @staticmethod
    def normalize(address):
        """The form an address is kept and compared in: trimmed and lowercased (as ESPs compare them)."""
        return str(address or "").strip().lower()[:254]

    @classmethod
    def reason_for(cls, address):
        """Why ``address`` is suppressed, or None when it is not."""
        return cls.objects.filter(address=cls.normalize(address)).values_list("reason", flat=True).first()


class Provider(models.Model):
    """The providers' circuit breakers. Their state lives in Redis (pipeline.gates.breaker): this unmanaged model gives
    them a page in the admin, and permissions (view to see them, change to force one open or closed)."""

    id = models.CharField(primary_key=True, max_length=110)

    class Meta:
        managed = False
        verbose_name = _("provider")
        verbose_name_plural = _("providers")
        default_permissions = ("view", "change")

    def __str__(self):
        return self.id


class DeadLetter(models.Model):
    """A message that could not be sent. The rows live in Redis (pipeline.broker.deadletters), not in the database:
    this unmanaged model gives them a page in the admin, and permissions (view to list, change to replay,
    delete to discard)."""

    id = models.CharField(primary_key=True, max_length=40)

    class Meta:
        managed = False
        verbose_name = _("dead letter")
        verbose_name_plural = _("dead letters")
        default_permissions = ("view", "change", "delete")

    def __str__(self):
        return self.id
