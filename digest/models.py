"""Per-user digest preferences: "deliver every event separately", for every kind or for one."""

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _


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

    @property
    def optout_member(self):
        """The member of the Redis opt-out set this row stands for."""
        return optout_member(self.user_id, self.kind)


def optout_member(user_id, kind=""):
    """ "<user id>" for every kind, "<user id>|<kind>" for one (as pipeline/lua/fold.lua tests them)."""
    return f"{user_id}|{kind}" if kind else str(user_id)
