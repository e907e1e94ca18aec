"""Issue 40: where support looks. A user's steps in words on the admin's timeline (newest first, filtered), a page
per notification id (a digest's lists the events it carried), `manage.py activity`, and the staff-only JSON view."""

import json
from datetime import datetime, timedelta
from io import StringIO
from zoneinfo import ZoneInfo

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from digest.flush import run_flush
from notifications import Outcome, Rejected, notify, preferences
from notifications.activity import tasks
from notifications.activity.models import ActivityEntry
from notifications.activity.words import Words

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(60)]


@pytest.fixture
def day(redis_client, user, settings):
    """A few of one user's decisions, drained: accepted, suppressed by a choice, held by quiet hours, rejected."""
    settings.SLUICE_QUEUES = {"critical": {"capacity": 1, "wait_ms": 10}}
    user.first_name, user.last_name = "Ada", "Lovelace"
    user.save()
    notify(user, "task.comment", entity_id="t1", payload={"title": "Fix login"})
    preferences.set(user, kind="task.assigned", mode="off")
    assert notify(user, "task.assigned", entity_id="t2") is Outcome.SUPPRESSED
    zone = "Europe/Berlin"
    now = datetime.now(ZoneInfo(zone))
    end = (now + timedelta(hours=1)).replace(second=0, microsecond=0)
    preferences.set_quiet_hours(user, zone, (now - timedelta(hours=1)).time(), end.time())
    assert notify(user, "task.comment", entity_id="t3") is Outcome.FOLDED
    notify(user, "meeting.reminder", entity_id="m1")
    with pytest.raises(Rejected):
        notify(user, "meeting.reminder", entity_id="m2")
    tasks.drain()
    # The words give the day too when the quiet hours end after midnight (a run between 23:00 and 00:00 in Berlin).
    return {"until": end.strftime("%H:%M" if end.date() == now.date() else "%Y-%m-%d %H:%M")}


def said(user):
    words = Words(user)
    return [str(words.say(entry)) for entry in ActivityEntry.objects.filter(user=user).order_by("at", "id")]


@pytest.mark.expected_errors("critical queue 'critical' full")
def test_each_step_says_what_happened_and_why(day, user):
    assert said(user) == [
        "Queued to send now",
        f"Not sent: Ada Lovelace turned task.assigned off on {datetime.now(ZoneInfo('Europe/Berlin')):%d %b}",
        f"Held by quiet hours until {day['until']} Europe/Berlin",
        "Queued to send now",
        "Rejected: the critical queue stayed full for the whole wait; the caller was told to retry in 1 s",
    ]


@pytest.mark.expected_errors("critical queue 'critical' full")
def test_the_admin_timeline_is_newest_first_filtered_and_staff_only(day, user, client, staff):
    url = reverse("admin:sluice_notifications_activity_user", args=[user.pk])
    client.force_login(staff("nobody"))
    assert client.get(url).status_code == 403
    client.force_login(staff("support", "view_activity"))
    page = client.get(url).content.decode()
    assert page.index("Rejected: the critical queue") < page.index("Held by quiet hours") < page.index("Fix login")
    assert "Not sent: Ada Lovelace turned task.assigned" in page
    only = client.get(url, {"outcome": "deferred"}).content.decode()
    assert "Held by quiet hours" in only
    assert "Fix login" not in only
    assert client.get(reverse("admin:sluice_notifications_activity_user", args=["nope"])).status_code == 404


@pytest.mark.expected_errors("critical queue 'critical' full")
def test_the_users_own_admin_page_shows_their_newest_steps_in_words(day, user, client, staff):
    from notifications.activity.admin import INLINE_ROWS

    url = f"/admin/auth/user/{user.pk}/change/"  # Sluice's own project carries ActivityInline on its User admin
    client.force_login(staff("viewer", "view_user"))
    assert "Held by quiet hours" not in client.get(url).content.decode()  # not without view_activity
    client.force_login(staff("support", "view_user", "view_activity"))
    page = client.get(url).content.decode()
    assert page.index("Rejected: the critical queue") < page.index("Held by quiet hours")  # newest first
    assert reverse("admin:sluice_notifications_activity_user", args=[user.pk]) in page  # the whole timeline
    for n in range(INLINE_ROWS + 5):
        notify(user, "task.comment", entity_id=f"more-{n}")
    tasks.drain()
    page = client.get(url).content.decode()
    assert "Rejected: the critical queue" not in page  # only the newest INLINE_ROWS
    assert page.count("/activityentry/notification/") == INLINE_ROWS


def test_a_digests_page_lists_the_events_it_carried(redis_client, user, client, staff):
    preferences.set(user, mode="digest")
    notify(user, "task.comment", entity_id="t1", payload={"title": "Fix login"})
    notify(user, "task.comment", entity_id="t1", payload={"title": "Fix login"})
    run_flush("test")
    tasks.drain()
    digest = ActivityEntry.objects.get(outcome="digested")
    client.force_login(staff("support", "view_activity"))
    page = client.get(reverse("admin:sluice_notifications_activity_notification", args=[digest.notification_id]))
    text = page.content.decode()
    assert "A digest of 2 events" in text
    assert text.count("Folded into the digest: ada takes task.comment as a digest") == 2
    event = ActivityEntry.objects.filter(outcome="folded").first()
    back = client.get(reverse("admin:sluice_notifications_activity_notification", args=[event.notification_id]))
    assert digest.notification_id in back.content.decode()


@pytest.mark.expected_errors("critical queue 'critical' full")
def test_the_command_prints_the_same_in_order(day, user):
    out = StringIO()
    call_command("activity", "--user", str(user.pk), stdout=out)
    lines = out.getvalue().splitlines()
    assert [line.split(": ", 1)[1].rsplit("  (", 1)[0] for line in lines] == said(user)
    out = StringIO()
    call_command("activity", "--user", str(user.pk), "--kind", "meeting.reminder", "--since", "1d", stdout=out)
    assert len(out.getvalue().splitlines()) == 2
    out = StringIO()
    call_command("activity", "--user", str(user.pk), "--json", "--outcome", "rejected", stdout=out)
    [row] = [json.loads(line) for line in out.getvalue().splitlines()]
    assert (row["outcome"], row["reason"], row["detail"]) == ("rejected", "full", "1")
    with pytest.raises(CommandError, match="--since"):
        call_command("activity", "--user", str(user.pk), "--since", "yesterday")
    with pytest.raises(CommandError, match="no user"):
        call_command("activity", "--user", "999999")


@pytest.mark.expected_errors("critical queue 'critical' full")
def test_the_json_view_is_staff_only_and_pages(day, user, client, staff):
    url = reverse("sluice:activity")
    assert client.get(url, {"user": user.pk}).status_code == 401
    client.force_login(staff("plain"))
    assert client.get(url, {"user": user.pk}).status_code == 403
    client.force_login(staff("support", "view_activity"))
    first = client.get(url, {"user": user.pk, "limit": 2}).json()
    assert [e["outcome"] for e in first["entries"]] == ["rejected", "accepted"]
    second = client.get(url, {"user": user.pk, "limit": 2, "before": first["next"]}).json()
    assert [e["outcome"] for e in second["entries"]] == ["deferred", "suppressed"]
    assert second["entries"][0]["words"].startswith("Held by quiet hours")
    assert client.get(url, {"user": user.pk, "limit": 501}).status_code == 400
    assert client.get(url, {"user": "nope"}).status_code == 404
    one = client.get(url, {"notification": first["entries"][0]["notification_id"]}).json()
    assert [e["outcome"] for e in one["entries"]] == ["rejected"]
