"""Issue 40's scripted day for one user, through a real worker and a real Redis: a critical rejected, one sent, one
folded and delivered in a digest, one suppressed by a choice, one held by quiet hours, one throttled, one scheduled
then moved then sent, one cancelled, one bounced, one inbox item read before its escalation. The admin's timeline
(headless Chromium, desktop and phone, screenshots in docs/screenshots/) and `manage.py activity` show every step in
order with its reason in words; the digest's page lists the events it carried."""

import time
from datetime import datetime, timedelta
from io import StringIO
from zoneinfo import ZoneInfo

import pytest
from celery.contrib.testing.worker import start_worker
from django.core.management import call_command
from django.urls import reverse

from digest.flush import run_flush
from notifications import Outcome, Rejected, cancel_scheduled, notify, preferences
from notifications.activity import tasks
from notifications.activity.models import ActivityEntry
from notifications.delivery.records import StatusEvent, apply, record_sent
from notifications.inbox.models import InboxItem
from notifications.inbox.views import change
from notifications.scheduling.runner import step_once
from pipeline import activity_fields
from pipeline.celery import app
from pipeline.redis import keys
from tests.system.test_inbox_bell import PHONE, SHOTS, browser
from tests.waiting import wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(300)]

LOCMEM = {"backend": "notifications.channels.locmem.LocmemChannel"}
INBOX = {"backend": "notifications.inbox.channel.InboxChannel"}


@pytest.fixture
def day_settings(settings):
    settings.SLUICE_CHANNELS = {"email": LOCMEM, "push": LOCMEM, "sms": LOCMEM, "inbox": INBOX}
    settings.SLUICE_KINDS = {
        **settings.SLUICE_KINDS,
        "meeting.reminder": {"class": "critical", "channels": ["email", "push"]},
        "task.comment": {"class": "routine", "channels": ["email"]},
        "task.assigned": {"class": "routine", "channels": ["email"]},
        "task.nudge": {"class": "routine", "channels": ["email"], "throttle": {"max": 1, "per_s": 3600}},
        "board.updated": {"class": "background", "channels": ["email"]},
        "mention": {"class": "routine", "channels": ["inbox"]},
    }
    settings.SLUICE_QUEUES = {"critical": {"capacity": 1, "wait_ms": 20}}


def steps(user):
    return [(e.outcome, e.kind, e.channel) for e in ActivityEntry.objects.filter(user=user).order_by("at", "id")]


def send_ended(client, channel):
    """Whether the activity buffer holds a send's end on ``channel`` (read from Redis only)."""
    entries = (activity_fields.decode(fields) for _id, fields in client.xrange(keys.activity()))
    return any(entry.outcome == activity_fields.SENT and entry.channel == channel for entry in entries)


@pytest.mark.expected_errors("critical queue 'critical' full")
def test_a_scripted_day_reads_in_order_in_words(day_settings, redis_client, django_user_model, live_server, client):
    alice = django_user_model.objects.create_user("alice", email="alice@example.com", first_name="Alice")
    # Before any worker runs: the critical queue holds its one message, and the next reminder is refused.
    assert notify(alice, "meeting.reminder", entity_id="daily", payload={"title": "Daily 10:00"}) is Outcome.ACCEPTED
    with pytest.raises(Rejected):
        notify(alice, "meeting.reminder", entity_id="retro", payload={"title": "Retro"})
    with start_worker(
        app,
        pool="threads",
        concurrency=2,
        perform_ping_check=False,
        queues=["critical", "routine", "background"],
        loglevel="WARNING",
        shutdown_timeout=30,
    ):
        sent = lambda: ActivityEntry.objects.filter(user=alice, outcome="sent")  # noqa: E731

        def drained_sent(n):
            tasks.drain()
            return sent().count() >= n

        wait_for(lambda: drained_sent(2), what="the reminder sent by email and push")
        preferences.set(alice, kind="task.comment", mode="digest")
        notify(alice, "task.comment", entity_id="t1", payload={"title": "Fix login"})
        notify(alice, "task.comment", entity_id="t1", payload={"title": "Fix login"})
        run_flush("test")
        wait_for(lambda: drained_sent(3), what="the digest sent")
        preferences.set(alice, kind="task.assigned", mode="off")
        assert notify(alice, "task.assigned", entity_id="t2", payload={"title": "Release"}) is Outcome.SUPPRESSED
        notify(alice, "task.nudge", entity_id="t3", payload={"title": "Nudge"})
        wait_for(lambda: drained_sent(4), what="the first nudge sent")
        assert notify(alice, "task.nudge", entity_id="t3", payload={"title": "Nudge again"}) is Outcome.FOLDED
        later = time.time() + 3600
        notify(alice, "task.comment", entity_id="t4", payload={"title": "Standup"}, send_at=later, key="10m")
        notify(alice, "task.comment", entity_id="t4", payload={"title": "Standup"}, send_at=later + 60, key="10m")
        notify(alice, "task.comment", entity_id="t5", payload={"title": "Planning"}, send_at=later, key="1h")
        assert cancel_scheduled("task.comment", "t5") == 1
        preferences.set(alice, kind="task.comment", mode="instant")
        step_once("routine", now=later + 61)
        wait_for(lambda: drained_sent(5), what="the moved send sent by the mover")
        notify(alice, "mention", entity_id="doc-7", payload={"title": "You were mentioned"})
        # The worker writes the inbox item and its inbox_created row in one transaction, then ends the send in Redis.
        # Wait for that end without writing to the database meanwhile (a drain would): SQLite's shared in-memory
        # test database refuses a second writer at once rather than waiting for it.
        wait_for(lambda: send_ended(redis_client, "inbox"), what="the inbox item written and its send ended")
        assert drained_sent(6)
        assert InboxItem.objects.filter(user=alice).exists()
        from django.db.models import Q

        change(alice.pk, "read_at", Q())
        now = datetime.now(ZoneInfo("Europe/Berlin"))
        quiet = ((now - timedelta(hours=1)).time(), (now + timedelta(hours=1)).time())
        preferences.set_quiet_hours(alice, "Europe/Berlin", *quiet)
        assert notify(alice, "board.updated", entity_id="b1", payload={"title": "Board moved"}) is Outcome.COLLAPSED
    email_sent = ActivityEntry.objects.filter(user=alice, outcome="sent", channel="email").order_by("at").first()
    record_sent_message = email_sent  # the provider's later word on the reminder's email
    from notifications.channels.base import Message

    message = Message(
        id=record_sent_message.notification_id,
        channel="email",
        kind="meeting.reminder",
        klass="critical",
        user_id=alice.pk,
        entity_id="daily",
        subject="",
        body="",
    )
    record_sent(message, "ses", "ses-1", "alice@example.com")
    apply(StatusEvent(status="bounced", message_id="ses-1", provider="ses", detail="mailbox full"))
    tasks.drain()

    outcomes = [outcome for outcome, _kind, _channel in steps(alice)]
    for expected in (
        "accepted",
        "rejected",
        "sent",
        "folded",
        "digested",
        "suppressed",
        "throttled",
        "scheduled",
        "moved",
        "cancelled",
        "inbox_created",
        "inbox_read",
        "deferred",
        "bounced",
    ):
        assert expected in outcomes, (expected, outcomes)
    assert outcomes.index("rejected") < outcomes.index("sent") < outcomes.index("digested") < outcomes.index("moved")

    out = StringIO()
    call_command("activity", "--user", str(alice.pk), "--limit", "500", stdout=out)
    printed = out.getvalue()
    for words in (
        "Rejected: the critical queue stayed full",
        "Sent by email",
        "Folded into the digest: Alice takes task.comment as a digest",
        "A digest of 2 events, sent on email",
        "Not sent: Alice turned task.assigned off",
        "Held back by the throttle of task.nudge",
        "Moved to",
        "Scheduled send cancelled",
        "Read in the inbox",
        "Held by quiet hours until",
        "Bounced, says ses: mailbox full",
    ):
        assert words in printed, (words, printed)

    support = django_user_model.objects.create_user("support", password="pw", is_staff=True)
    from django.contrib.auth.models import Permission

    support.user_permissions.add(Permission.objects.get(codename="view_activity"))
    client.force_login(support)
    driver = browser()
    SHOTS.mkdir(parents=True, exist_ok=True)
    try:
        driver.get(live_server.url + "/admin/")
        driver.add_cookie({"name": "sessionid", "value": client.cookies["sessionid"].value, "path": "/"})
        driver.get(live_server.url + reverse("admin:sluice_notifications_activity_user", args=[alice.pk]))
        from selenium.webdriver.common.by import By

        rows = driver.find_elements(By.CSS_SELECTOR, "table.sluice-activity tbody tr")
        assert len(rows) == len(outcomes)
        assert "Bounced, says ses" in rows[0].text  # newest first
        driver.set_window_size(1280, 1400)
        driver.save_screenshot(str(SHOTS / "activity-timeline.png"))
        driver.set_window_size(*PHONE)
        driver.save_screenshot(str(SHOTS / "activity-timeline-phone.png"))
        digest = ActivityEntry.objects.get(user=alice, outcome="digested")
        driver.set_window_size(1280, 800)
        driver.get(
            live_server.url + reverse("admin:sluice_notifications_activity_notification", args=[digest.notification_id])
        )
        carried = driver.find_elements(By.CSS_SELECTOR, "table.sluice-activity-carried tbody tr")
        assert len(carried) == 2
        driver.save_screenshot(str(SHOTS / "activity-digest.png"))
    finally:
        driver.quit()
