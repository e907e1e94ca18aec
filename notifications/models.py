"""Sluice's models: ingest tokens and the dead letters' admin page; preferences and delivery records live in
preference_models and delivery_models, imported here so Django finds them."""

import hashlib
import secrets

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


from .delivery_models import Delivery, DeliveryStatus, Provider, Suppression  # noqa: E402,F401 - models of this app
from .preference_models import NotificationSettings, Preference  # noqa: E402,F401 - models of this app
