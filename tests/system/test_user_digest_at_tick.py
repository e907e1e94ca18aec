"""One digest per user, end to end with a real worker and Redis: a daily cadence's 30 changed entities of 3 kinds
arrive as one email listing 20 groups and "10 more"; a user on instant gets theirs at once; an SMS kind stays out of
the email. In the system tier: its 467 notify() calls and a real worker took 4 to 10 s on a loaded machine, at the
fast tiers' budget."""

import re
import time

import pytest
from celery.contrib.testing.worker import start_worker

from digest.flush import run_flush
from notifications import Outcome, notify, preferences
from pipeline.celery import app
from pipeline.metrics import digest_events_field, digest_messages_field, read_counters
from pipeline.redis import keys
from tests.waiting import settled, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(60)]

EMAIL_KINDS = ("task.changed", "doc.edited", "budget.commented")
LOCMEM_EMAIL = "notifications.channels.locmem.LocmemEmailChannel"


@pytest.fixture
def worker(redis_client, locmem_channels, settings):
    # The email channel renders as the email backends do: the layout's HTML and the text's footer.
    settings.SLUICE_CHANNELS = {**settings.SLUICE_CHANNELS, "email": {"backend": LOCMEM_EMAIL}}
    settings.SLUICE_KINDS = {
        **settings.SLUICE_KINDS,
        "task.changed": {"class": "routine", "channels": ["email"], "url": "https://app.example.com/t/{entity_id}"},
        "doc.edited": {"class": "routine", "channels": ["email"]},
        "budget.commented": {"class": "routine", "channels": ["email"]},
        "shift.swapped": {"class": "routine", "channels": ["sms"]},
    }
    with start_worker(
        app,
        pool="threads",
        concurrency=2,
        perform_ping_check=False,
        queues=["critical", "routine", "background"],
        loglevel="WARNING",
        shutdown_timeout=30,
    ):
        yield locmem_channels


def test_a_daily_cadence_gets_one_email_listing_20_groups_and_10_more(worker, django_user_model, redis_client):
    daily = django_user_model.objects.create_user("daily", email="daily@example.com", first_name="Ada")
    instant = django_user_model.objects.create_user("instant", email="instant@example.com")
    preferences.set_cadence(daily, "daily", "08:30")
    # The next tick a minute away, so every event below is held however slow the machine; brought forward below
    # once they all are: waiting for 08:30 is not a test.
    tick = time.time() + 60
    redis_client.hset(keys.preferences(daily.pk), "c", str(int(tick)))
    redis_client.set(keys.preferences_rebuilt(), 1)  # no rebuild puts the real tick back meanwhile
    expected = {}
    for n in range(30):
        kind, entity = EMAIL_KINDS[n % 3], f"e{n:02}"
        # Counts 1..30, each distinct: the 20 listed are the 20 busiest, and each shows its own count.
        for i in range(n + 1):
            assert notify(daily, kind, entity_id=entity, payload={"title": f"Item {n}", "i": i}) == Outcome.FOLDED
        expected[f"Item {n}"] = n + 1
    for entity in ("s1", "s2"):
        assert notify(daily, "shift.swapped", entity_id=entity, payload={"title": f"Shift {entity}"}) == Outcome.FOLDED
    assert notify(instant, "task.changed", entity_id="e00", payload={"title": "Now"}) == Outcome.ACCEPTED

    wait_for(lambda: [m.user_id for m in worker] == [instant.pk], what="the instant user's message, at once")
    run_flush("test")
    assert not [m for m in worker if m.user_id == daily.pk], "the daily digest went out before its tick"

    # The tick comes: every held fold of the daily user is due now.
    redis_client.zadd(keys.pending(), dict.fromkeys(redis_client.zrange(keys.pending(), 0, -1), time.time()), xx=True)
    wait_for(lambda: run_flush("test") is not None and len([m for m in worker if m.user_id == daily.pk]) == 2)
    wait_for(lambda: settled("routine"), what="every send finished")
    mine = [m for m in worker if m.user_id == daily.pk]
    [email] = [m for m in mine if m.channel == "email"]
    [sms] = [m for m in mine if m.channel == "sms"]

    # Each line says when its latest event happened, after its count: "- Item 29: 30 updates (latest ...)".
    listed = dict(re.findall(r"^- (Item \d+): (\d+) updates? \(latest [^)]+\)$", email.body, re.MULTILINE))
    assert len(listed) == 20
    busiest = sorted(expected, key=expected.get, reverse=True)[:20]
    assert {title: int(count) for title, count in listed.items()} == {title: expected[title] for title in busiest}
    assert "and 10 more (55 updates)" in email.body  # the ten quietest: 1 + 2 + ... + 10 events
    assert email.count == sum(expected.values()) == 465
    assert email.subject == "465 updates in your digest"
    assert "Hi Ada," in email.body
    assert "Shift" not in email.body
    assert "Shift" not in email.html
    assert re.search(r'<a [^>]*href="https://app.example.com/t/e27"[^>]*>Item 27</a>', email.html)
    assert "<style" not in email.html
    assert sms.count == 2
    assert "Shift s1" in sms.body
    assert "Item" not in sms.body

    run_flush("test")
    assert len([m for m in worker if m.user_id == daily.pk]) == 2, "a second digest"
    counters = read_counters()
    assert counters[digest_messages_field("routine")] == 2
    assert counters[digest_events_field("routine")] == 467
