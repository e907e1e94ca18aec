"""Sluice's models: ingest tokens, digest preferences, delivery status records, suppressions, and admin pages."""

import hashlib
import secrets

from django.conf import settings
from django.core.validators import MinValueValidator
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

TOKEN_PREFIX = "slk_"
# What the admin shows to tell tokens apart: "slk_" and the first 8 random characters (48 bits, not a secret).
VISIBLE_CHARS = len(TOKEN_PREFIX) + 8
# A write per request would make the token row the hottest in the database; a minute is precise enough.
LAST_USED_RESOLUTION_S = 60


def digest(raw):
    """The SHA-256 hex digest stored for a raw token. A plain hash is enough: the token has 256 random bits."""
    return hashlib.sha256(raw.encode()).hexdigest()


class IngestToken(models.Model):
    """A bearer token of one service: optionally limited to some kinds, and rate-limited."""

    name = models.CharField(_("name"), max_length=100, help_text=_("The service that uses this token."))
    prefix = models.CharField(_("prefix"), max_length=VISIBLE_CHARS, editable=False)
    digest = models.CharField(_("digest"), max_length=64, unique=True, editable=False)
    kinds = models.JSONField(
        _("kinds"), default=list, blank=True, help_text=_("The kinds this token may send. None selected: every kind.")
    )
    rate_per_second = models.FloatField(
        _("requests per second"),
        default=20.0,
        validators=[MinValueValidator(0.01)],
        help_text=_("Sustained rate; beyond it (and the burst) requests get 429 with Retry-After."),
    )
    burst = models.PositiveIntegerField(
        _("burst"), default=100, validators=[MinValueValidator(1)], help_text=_("Requests allowed at once.")
    )
    is_active = models.BooleanField(_("active"), default=True, help_text=_("Clear to revoke the token."))
    created_at = models.DateTimeField(_("created"), auto_now_add=True)
    last_used_at = models.DateTimeField(_("last used"), null=True, blank=True, editable=False)

    class Meta:
        verbose_name = _("ingest token")
        verbose_name_plural = _("ingest tokens")

    def __str__(self):
        return f"{self.name} ({self.prefix}…)"

    def set_new_token(self):
        """Give this row a fresh random token; return it raw. Only its digest and prefix are kept."""
        raw = TOKEN_PREFIX + secrets.token_urlsafe(32)
        self.prefix = raw[:VISIBLE_CHARS]
        self.digest = digest(raw)
        return raw

    def allows(self, kind):
        """Whether this token may send ``kind``."""
        return not self.kinds or kind in self.kinds

    def touch(self):
        """Record a use, at most once a minute."""
        now = timezone.now()
        if self.last_used_at and (now - self.last_used_at).total_seconds() < LAST_USED_RESOLUTION_S:
            return
        IngestToken.objects.filter(pk=self.pk).update(last_used_at=now)
        self.last_used_at = now


class DeadLetter(models.Model):
    """A message that could not be sent. The rows live in Redis (pipeline.deadletters), not in the database:
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


class DigestPreference(models.Model):
    """A user who opted out of digests, for all kinds (kind empty) or for one kind."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="digest_preferences", verbose_name=_("user")
    )
    kind = models.CharField(
        _("kind"), max_length=100, blank=True, default="", help_text=_("Leave empty to apply to every kind.")
    )
    deliver_separately = models.BooleanField(
        _("deliver every event separately"),
        default=True,
        help_text=_("Never fold this user's events into a digest; deliver each one on its own, later if need be."),
    )
    updated_at = models.DateTimeField(_("updated"), auto_now=True)

    class Meta:
        verbose_name = _("digest preference")
        verbose_name_plural = _("digest preferences")
        constraints = [models.UniqueConstraint(fields=["user", "kind"], name="digest_preference_user_kind")]

    def __str__(self):
        scope = self.kind or _("all kinds")
        state = _("separately") if self.deliver_separately else _("digests allowed")
        return f"{self.user} / {scope}: {state}"

    def clean(self):
        from django.core.exceptions import ValidationError

        from .kinds import all_kinds

        if self.kind and self.kind not in all_kinds():
            raise ValidationError({"kind": _("%(kind)s is not a registered kind.") % {"kind": self.kind}})

    @property
    def optout_member(self):
        """The member of the Redis opt-out set this row stands for."""
        return optout_member(self.user_id, self.kind)


def optout_member(user_id, kind=""):
    """ "<user id>" for every kind, "<user id>|<kind>" for one (as pipeline/lua/fold.lua tests them)."""
    return f"{user_id}|{kind}" if kind else str(user_id)


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
    """The providers' circuit breakers. Their state lives in Redis (pipeline.breaker): this unmanaged model gives
    them a page in the admin, and permissions (view to see them, change to force one open or closed)."""

    id = models.CharField(primary_key=True, max_length=110)

    class Meta:
        managed = False
        verbose_name = _("provider")
        verbose_name_plural = _("providers")
        default_permissions = ("view", "change")

    def __str__(self):
        return self.id
