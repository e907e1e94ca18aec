"""An activity entry in words: what happened to a notification and why, for support staff (translatable).

One Words per user reads what explains their steps once (their name, time zone and the choices that turned kinds
off, through Django's app registry: the log's wing imports no other wing), then says each entry in a sentence.
"""

from datetime import UTC, datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.apps import apps
from django.utils.translation import gettext_lazy as _

from pipeline import activity_fields as f
from pipeline.conf import sluice_settings

# What each step says; %(name)s fields are filled in by Words.say.
SAYINGS = {
    f.ACCEPTED: _("Queued to send now"),
    (f.ACCEPTED, "waited"): _("Queued to send after waiting for room in the %(klass)s queue"),
    (f.FOLDED, "overflow"): _("Folded into the digest: the %(klass)s queue was full"),
    (f.FOLDED, "preference"): _("Folded into the digest: %(user)s takes %(kind)s as a digest"),
    (f.COLLAPSED, "overflow"): _("Collapsed to its latest state: the %(klass)s queue was full"),
    (f.COLLAPSED, "preference"): _("Collapsed into the digest: %(user)s takes %(kind)s as a digest"),
    f.COLLAPSED: _("Collapsed to its latest state"),
    f.FOLDED: _("Folded into the digest"),
    (f.DEFERRED, "quiet"): _("Held by quiet hours until %(until)s"),
    (f.DEFERRED, "cadence"): _("Held for %(user)s's digest cadence until %(until)s"),
    (f.DEFERRED, "overflow"): _(
        "Waiting in the overflow: the %(klass)s queue was full and %(user)s chose instant delivery"
    ),
    f.THROTTLED: _("Held back by the throttle of %(kind)s: folded into the digest"),
    f.SUPPRESSED: _("Not sent: %(user)s turned %(what)s off%(since)s"),
    (f.REJECTED, "full"): _(
        "Rejected: the %(klass)s queue stayed full for the whole wait; the caller was told to retry in %(detail)s s"
    ),
    (f.REJECTED, "ceiling"): _("Rejected: the %(klass)s queue is at its hard ceiling"),
    (f.REJECTED, "overflow_full"): _("Rejected: the %(klass)s queue and its overflow were full"),
    (f.REJECTED, "store_full"): _("Rejected: the %(klass)s queue and the digest's store were full"),
    f.REJECTED: _("Rejected"),
    f.REPLAYED: _("A repeat of an earlier call's idempotency key: answered %(detail)s again, nothing sent"),
    f.SENT: _("Sent by %(channel)s%(through)s"),
    f.RETRIED: _("Failed on %(channel)s (%(reason)s: %(detail)s); tried again later"),
    f.EXPIRED: _("Not sent by %(channel)s: it expired first (%(detail)s)"),
    f.DEAD_LETTERED: _("Not sent by %(channel)s, kept in the dead letters: %(reason)s (%(detail)s)"),
    f.DIGESTED: _("A digest of %(detail)s events, sent on %(channel)s"),
    f.SCHEDULED: _("Scheduled for %(until)s"),
    f.MOVED: _("Moved to %(until)s"),
    f.CANCELLED: _("Scheduled send cancelled"),
    f.DELIVERED: _("Delivered, says %(provider)s"),
    f.BOUNCED: _("Bounced, says %(provider)s: %(detail)s"),
    f.COMPLAINED: _("Marked as spam by the recipient, says %(provider)s"),
    f.OPENED: _("Opened, says %(provider)s"),
    f.INBOX_CREATED: _("Put in the inbox"),
    f.INBOX_FOLDED: _("Folded into the unread inbox item of the same kind and entity"),
    f.INBOX_READ: _("Read in the inbox"),
    f.ESCALATED: _("Escalated from the unread inbox item to %(channel)s"),
}
#: What a step is called in a filter or a column.
OUTCOME_NAMES = {
    f.ACCEPTED: _("accepted"),
    f.FOLDED: _("folded"),
    f.COLLAPSED: _("collapsed"),
    f.DEFERRED: _("deferred"),
    f.THROTTLED: _("throttled"),
    f.SUPPRESSED: _("suppressed"),
    f.REJECTED: _("rejected"),
    f.REPLAYED: _("replayed"),
    f.SENT: _("sent"),
    f.RETRIED: _("retried"),
    f.EXPIRED: _("expired"),
    f.DEAD_LETTERED: _("dead-lettered"),
    f.DIGESTED: _("digest sent"),
    f.SCHEDULED: _("scheduled"),
    f.MOVED: _("moved"),
    f.CANCELLED: _("cancelled"),
    f.DELIVERED: _("delivered"),
    f.BOUNCED: _("bounced"),
    f.COMPLAINED: _("complained"),
    f.OPENED: _("opened"),
    f.INBOX_CREATED: _("in the inbox"),
    f.INBOX_FOLDED: _("folded in the inbox"),
    f.INBOX_READ: _("read"),
    f.ESCALATED: _("escalated"),
}


class Words:
    """Says a user's entries in words; reads what explains them once, on first use."""

    def __init__(self, user):
        self.user = user
        self._zone = None
        self._off = None

    @property
    def name(self):
        user = self.user
        full = user.get_full_name() if hasattr(user, "get_full_name") else ""
        return full or user.get_username()

    def zone(self):
        """The user's time zone (their notification settings'), UTC when they chose none."""
        if self._zone is None:
            settings_model = apps.get_model("sluice_notifications", "NotificationSettings")
            name = settings_model.objects.filter(user=self.user).values_list("timezone", flat=True).first() or "UTC"
            try:
                self._zone = ZoneInfo(name)
            except (ZoneInfoNotFoundError, ValueError):
                self._zone = ZoneInfo("UTC")
        return self._zone

    def when(self, seconds):
        """Unix seconds as the user's local time, with the zone's name: "07:00 Europe/Berlin" (with the day when it
        is not today's)."""
        local = datetime.fromtimestamp(float(seconds), tz=UTC).astimezone(self.zone())
        today = datetime.now(tz=self.zone()).date()
        shown = local.strftime("%H:%M") if local.date() == today else local.strftime("%Y-%m-%d %H:%M")
        return f"{shown} {self.zone().key}"

    def what_off(self, kind):
        """Which of the user's choices turned ``kind`` off, most specific first, and since when: ("task.comment on
        email", " on 02 Dec"), ("the category tasks", ...), ("every kind", ...); (the kind, "") when no row says so
        any more."""
        if self._off is None:
            preference = apps.get_model("sluice_notifications", "Preference")
            self._off = list(
                preference.objects.filter(user=self.user, mode="off").values(
                    "kind", "category", "channel", "updated_at"
                )
            )
        known = sluice_settings().kinds.get(kind)
        category = known.category if known else ""
        for test, label in (
            (lambda row: row["kind"] == kind, kind),
            (
                lambda row: category and row["category"] == category,
                _("the category %(category)s") % {"category": category},
            ),
            (lambda row: not row["kind"] and not row["category"], _("every kind")),
        ):
            rows = [row for row in self._off if test(row)]
            if rows:
                channels = sorted({row["channel"] for row in rows if row["channel"]})
                on = _(" on %(channels)s") % {"channels": ", ".join(channels)} if channels else ""
                since = max(row["updated_at"] for row in rows).astimezone(self.zone()).strftime("%d %b")
                return f"{label}{on}", _(" on %(day)s") % {"day": since}
        return kind, ""

    def say(self, entry):
        """One entry (an ActivityEntry) in a sentence."""
        outcome, reason = entry.outcome, entry.reason
        saying = SAYINGS.get((outcome, reason)) or SAYINGS.get(outcome)
        reason = reason or ""
        if saying is None:
            return f"{outcome} {reason}".strip()
        fields = {
            "user": self.name,
            "kind": entry.kind,
            "klass": entry.klass,
            "channel": entry.channel or _("every channel"),
            "provider": entry.provider or _("the provider"),
            "reason": reason,
            "detail": entry.detail,
            "through": "",
            "until": "",
            "what": "",
            "since": "",
        }
        if outcome == f.SENT and entry.provider:
            fields["through"] = _(" through %(provider)s") % {"provider": entry.provider}
            if entry.detail:
                fields["through"] += _(" (its id %(id)s)") % {"id": entry.detail}
            if reason.startswith(f.FAILOVER_PREFIX):
                failed = reason.removeprefix(f.FAILOVER_PREFIX).replace(",", ", ")
                fields["through"] += _(", failed over from %(providers)s") % {"providers": failed}
        if outcome in (f.DEFERRED, f.SCHEDULED, f.MOVED) and _is_number(entry.detail):
            fields["until"] = self.when(entry.detail)
        if outcome == f.SUPPRESSED:
            fields["what"], fields["since"] = self.what_off(entry.kind)
        return saying % fields


def _is_number(text):
    try:
        float(text)
    except (TypeError, ValueError):
        return False
    return True


def as_dict(entry, said):
    """One entry, with its words, as the command's --json and the JSON view give it."""
    return {
        "id": entry.pk,
        "at": entry.at.isoformat(),
        "user": entry.user_id,
        "notification_id": entry.notification_id,
        "kind": entry.kind,
        "entity_id": entry.entity_id,
        "class": entry.klass,
        "outcome": entry.outcome,
        "reason": entry.reason,
        "detail": entry.detail,
        "channel": entry.channel,
        "provider": entry.provider,
        "title": entry.title,
        "words": str(said),
    }
