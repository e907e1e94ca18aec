"""Ingest tokens: one bearer token per service, scoped to kinds and payload fields, stored as a digest."""

import hashlib
import secrets

from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator
from django.db import models
from django.utils import timezone
from django.utils.text import slugify
from django.utils.translation import gettext_lazy as _

TOKEN_PREFIX = "slk_"
# What the admin shows to tell tokens apart: "slk_" and the first 8 random characters (48 bits, not a secret).
VISIBLE_CHARS = len(TOKEN_PREFIX) + 8
# A write per request would make the token row the hottest in the database; a minute is precise enough.
LAST_USED_RESOLUTION_S = 60
# Short, so that the namespace leaves most of SLUICE_MAX_ENTITY_ID_LENGTH to the service's own entity ids.
SERVICE_MAX_LENGTH = 40


def digest(raw):
    """The SHA-256 hex digest stored for a raw token. A plain hash is enough: the token has 256 random bits."""
    return hashlib.sha256(raw.encode()).hexdigest()


def no_control_characters(value):
    """A name that ends up in log lines and pages: printable characters only."""
    if any(not c.isprintable() for c in value):
        raise ValidationError(_("Use printable characters only."))


class IngestToken(models.Model):
    """A bearer token of one service: scoped to some kinds (and optionally payload fields), and rate-limited."""

    name = models.CharField(
        _("name"), max_length=100, validators=[no_control_characters], help_text=_("The service that uses this token.")
    )
    service = models.SlugField(
        _("service"),
        max_length=SERVICE_MAX_LENGTH,
        blank=True,
        help_text=_(
            'Namespace of this service\'s entity ids ("<service>:<entity_id>"), so that its events never fold '
            "into another service's digests. Tokens of one service share it. Empty: made from the name."
        ),
    )
    prefix = models.CharField(_("prefix"), max_length=VISIBLE_CHARS, editable=False)
    digest = models.CharField(_("digest"), max_length=64, unique=True, editable=False)
    kinds = models.JSONField(
        _("kinds"), default=list, blank=True, help_text=_("The kinds this token may send. None selected: none.")
    )
    payload_fields = models.JSONField(
        _("payload fields"),
        null=True,
        blank=True,
        default=None,
        help_text=_("The top-level payload fields this token may send. Empty: any field."),
    )
    reveal_details = models.BooleanField(
        _("reveal unknown users and outcomes"),
        default=False,
        help_text=_(
            "Answer unknown_user, and the outcome (folded, collapsed, deferred). Off: an unknown user and every "
            "published event both get 202 accepted, so the token cannot probe which user ids exist."
        ),
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

    def save(self, *args, **kwargs):
        if not self.service:
            self.service = service_slug(self.name)
        super().save(*args, **kwargs)

    def set_new_token(self):
        """Give this row a fresh random token; return it raw. Only its digest and prefix are kept."""
        raw = TOKEN_PREFIX + secrets.token_urlsafe(32)
        self.prefix = raw[:VISIBLE_CHARS]
        self.digest = digest(raw)
        return raw

    def allows(self, kind):
        """Whether this token may send ``kind``: only the kinds it lists (none listed: none)."""
        return isinstance(kind, str) and kind in (self.kinds or ())

    def fields_not_allowed(self, payload):
        """The top-level payload fields this token may not send (empty when its fields are not limited)."""
        if self.payload_fields is None or not isinstance(payload, dict):
            return []
        return sorted(str(name) for name in payload if name not in self.payload_fields)

    def namespaced(self, entity_id):
        """``entity_id`` in this token's service namespace: "<service>:<entity_id>"."""
        return f"{self.service}:{entity_id}"

    def touch(self):
        """Record a use, at most once a minute."""
        now = timezone.now()
        if self.last_used_at and (now - self.last_used_at).total_seconds() < LAST_USED_RESOLUTION_S:
            return
        IngestToken.objects.filter(pk=self.pk).update(last_used_at=now)
        self.last_used_at = now


def service_slug(name):
    """A service namespace made from a token's name. A name with characters a slug cannot keep (any but ASCII
    letters, digits, spaces, "-" and "_") gets a digest of the whole name after its slug, so that two such names
    never share one namespace ("Rechnungsstellung" and "Rechnungsstellüng", or two names in Cyrillic)."""
    slug = slugify(name)[:SERVICE_MAX_LENGTH].strip("-_")
    if slug and all(c.isascii() and (c.isalnum() or c in " -_") for c in name):
        return slug
    digest = hashlib.sha256(name.encode()).hexdigest()[:10]
    return f"{slug[: SERVICE_MAX_LENGTH - 11].strip('-_') or 'service'}-{digest}"
