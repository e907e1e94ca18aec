"""What users control: a mode per kind (or category, or every kind) and channel, and their quiet hours and cadence."""

from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.utils.translation import gettext_lazy as _

from pipeline.conf import sluice_settings
from pipeline.conf.kinds import MODES

MODE_CHOICES = [
    ("instant", _("instant: each event on its own")),
    ("digest", _("digest: folded into the digest")),
    ("off", _("off: not sent")),
]
CADENCES = [("immediate", _("immediate")), ("hourly", _("hourly")), ("daily", _("daily"))]


class Preference(models.Model):
    """One user's choice for a kind, a category or every kind (blank), on one channel or every channel (blank).

    The most specific row wins: kind and channel, kind, category and channel, category, channel, every kind;
    then the kind's default_mode. "instant" chosen by the user means every event on its own, even under
    overload (it waits in a bounded overflow instead of folding)."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        related_name="notification_preferences",
        verbose_name=_("user"),
    )
    kind = models.CharField(_("kind"), max_length=100, blank=True, default="", help_text=_("Empty: see category."))
    category = models.CharField(
        _("category"), max_length=100, blank=True, default="", help_text=_("Empty with no kind: every kind.")
    )
    channel = models.CharField(_("channel"), max_length=100, blank=True, default="", help_text=_("Empty: every one."))
    mode = models.CharField(_("mode"), max_length=10, choices=MODE_CHOICES, default="instant")
    updated_at = models.DateTimeField(_("updated"), auto_now=True)

    class Meta:
        verbose_name = _("notification preference")
        verbose_name_plural = _("notification preferences")
        constraints = [
            models.UniqueConstraint(fields=["user", "kind", "category", "channel"], name="sluice_preference_scope"),
            models.CheckConstraint(
                condition=models.Q(kind="") | models.Q(category=""), name="sluice_preference_kind_or_category"
            ),
        ]

    def __str__(self):
        scope = self.kind or (f"{self.category} (category)" if self.category else _("every kind"))
        return f"{self.user} / {scope} / {self.channel or _('every channel')}: {self.mode}"

    def clean(self):
        validate_choice(self.kind, self.category, self.channel, self.mode)


def validate_choice(kind, category, channel, mode):
    """Raise ValidationError, naming the field, unless (kind or category, channel) -> mode may be chosen."""
    conf = sluice_settings()
    if mode not in MODES:
        raise ValidationError({"mode": _("%(mode)s is not a mode; use instant, digest or off.") % {"mode": mode}})
    if kind and category:
        raise ValidationError({"category": _("Choose a kind or a category, not both.")})
    if kind and kind not in conf.kinds:
        raise ValidationError({"kind": _("%(kind)s is not a registered kind.") % {"kind": kind}})
    if category and category not in {k.category for k in conf.kinds.values()}:
        raise ValidationError({"category": _("%(category)s is not a category of any kind.") % {"category": category}})
    if channel and channel not in conf.channels:
        raise ValidationError({"channel": _("%(channel)s is not a channel.") % {"channel": channel}})
    if kind and mode != "instant":
        found = conf.kinds[kind]
        if found.mandatory:
            raise ValidationError(
                {"mode": _("%(kind)s is mandatory: it cannot be turned off or into a digest.") % {"kind": kind}}
            )
        if found.klass == "critical" and mode == "digest":
            raise ValidationError(
                {"mode": _("%(kind)s is critical: it is never folded into a digest.") % {"kind": kind}}
            )
    if kind and channel and channel not in conf.kinds[kind].channels:
        raise ValidationError(
            {"channel": _("%(kind)s is not sent on %(channel)s.") % {"kind": kind, "channel": channel}}
        )


def validate_timezone(name):
    """An IANA time zone name, or ValidationError."""
    try:
        if name not in available_timezones():
            raise ZoneInfoNotFoundError(name)
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValidationError(_("%(name)s is not an IANA time zone (e.g. Europe/Berlin).") % {"name": name}) from None


class NotificationSettings(models.Model):
    """One user's time zone, quiet hours and digest cadence. Without a row: UTC, no quiet hours, immediate."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        related_name="notification_settings",
        verbose_name=_("user"),
    )
    timezone = models.CharField(_("time zone"), max_length=64, default="UTC", validators=[validate_timezone])
    quiet_start = models.TimeField(_("quiet hours from"), null=True, blank=True)
    quiet_end = models.TimeField(
        _("quiet hours until"), null=True, blank=True, help_text=_("May be earlier than the start: across midnight.")
    )
    cadence = models.CharField(_("digest cadence"), max_length=10, choices=CADENCES, default="immediate")
    digest_at = models.TimeField(_("daily digest at"), null=True, blank=True, help_text=_("For a daily cadence."))
    updated_at = models.DateTimeField(_("updated"), auto_now=True)

    class Meta:
        verbose_name = _("notification settings")
        verbose_name_plural = _("notification settings")

    def __str__(self):
        return f"{self.user}: {self.timezone}, {self.cadence}"

    def clean(self):
        if (self.quiet_start is None) != (self.quiet_end is None):
            raise ValidationError({"quiet_end": _("Give quiet hours both a start and an end, or neither.")})
        if self.quiet_start is not None and self.quiet_start == self.quiet_end:
            raise ValidationError({"quiet_end": _("The quiet window is empty: its start and end are the same.")})
        if self.cadence == "daily" and self.digest_at is None:
            raise ValidationError({"digest_at": _("A daily cadence needs the time of day of its digest.")})
