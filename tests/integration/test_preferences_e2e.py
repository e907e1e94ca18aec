"""What users chose, end to end with a real worker and Redis: quiet hours, a cadence, a throttle, a mandatory kind,
channels turned off; every notify() is accounted for as sent singly, folded into a sent digest, or suppressed."""

import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from celery.contrib.testing.worker import start_worker

from digest.flush import run_flush
from notifications import Outcome, notify, preferences
from pipeline.celery import app
from pipeline.metrics import read_counters
from pipeline.redis import keys
from tests.waiting import settled, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]


@pytest.fixture
def worker(redis_client, locmem_channels, settings):
    settings.SLUICE_KINDS = {
        **settings.SLUICE_KINDS,
        "task.assigned": {"class": "routine", "channels": ["email", "push"], "throttle": {"max": 2, "per_s": 60}},
        "login.code": {"class": "critical", "channels": ["sms"], "mandatory": True},
    }
    with start_worker(
        app,
        pool="threads",
        concurrency=4,
        perform_ping_check=False,
        queues=["critical", "routine", "background"],
        loglevel="WARNING",
        shutdown_timeout=30,
    ):
        yield locmem_channels


def sent(outbox, user):
    """(notification id, channel, count) of every send to ``user``."""
    return [(m.id, m.channel, m.count) for m in outbox if m.user_id == user.pk]


def flush_until(predicate, timeout=20):
    return wait_for(lambda: run_flush("test") is not None and predicate(), timeout, what="the flushes delivered")


def daytime_zone():
    """A time zone where it is now between 02:00 and 21:00, so a quiet window around now does not cross midnight."""
    for name in ("UTC", "Asia/Tokyo", "America/New_York", "Pacific/Auckland"):
        if 2 <= datetime.now(ZoneInfo(name)).hour <= 21:
            return name
    raise AssertionError("no daytime zone")


def test_quiet_hours_hold_everything_then_one_digest_when_the_window_opens(worker, user, redis_client):
    zone = daytime_zone()
    now = datetime.now(ZoneInfo(zone))
    preferences.set_quiet_hours(user, zone, (now - timedelta(minutes=5)).time(), (now + timedelta(seconds=4)).time())
    outcomes = [notify(user, "task.comment", entity_id="t1", payload={"i": i}) for i in range(3)]
    outcomes.append(notify(user, "board.updated", entity_id="b1"))  # background is held as well
    assert outcomes == [Outcome.FOLDED] * 3 + [Outcome.COLLAPSED]
    run_flush("test")
    time.sleep(1)  # a second inside the quiet hours: the test is about what does not go out in that time
    assert sent(worker, user) == [], "something went out during quiet hours"
    flush_until(lambda: len(sent(worker, user)) == 2)
    assert sorted(count for _id, _channel, count in sent(worker, user)) == [1, 3]
    assert read_counters()["folds:routine:quiet"] == 3


def test_a_mandatory_kind_goes_out_at_once_whatever_the_user_chose(worker, user):
    zone = daytime_zone()
    now = datetime.now(ZoneInfo(zone))
    preferences.set_quiet_hours(user, zone, (now - timedelta(hours=1)).time(), (now + timedelta(hours=1)).time())
    preferences.set(user, mode="off")  # every kind off: but a sign-in code is mandatory
    assert notify(user, "login.code", entity_id="c1") is Outcome.ACCEPTED
    wait_for(lambda: len(sent(worker, user)) == 1)
    assert notify(user, "meeting.reminder", entity_id="m1") is Outcome.SUPPRESSED  # not mandatory: off


def test_off_suppresses_a_kind_or_removes_a_channel(worker, user):
    preferences.set(user, kind="task.comment", mode="off")
    preferences.set(user, kind="meeting.reminder", channel="push", mode="off")
    assert notify(user, "task.comment", entity_id="t1") is Outcome.SUPPRESSED
    assert notify(user, "meeting.reminder", entity_id="m1") is Outcome.ACCEPTED
    wait_for(lambda: len(sent(worker, user)) == 1)
    wait_for(lambda: settled("critical", "routine"), what="the send acked")
    assert [channel for _id, channel, _count in sent(worker, user)] == ["email"]
    assert read_counters()["notifications:routine:suppressed"] == 1


def test_an_hourly_cadence_sends_one_digest_per_tick_with_the_right_counts(worker, user, redis_client):
    preferences.set_cadence(user, "hourly")
    # The next two ticks, brought to the next seconds: waiting for the top of the hour is not a test.
    ticks = [time.time() + 2, time.time() + 5]
    redis_client.hset(keys.preferences(user.pk), "c", ",".join(str(int(t)) for t in ticks))
    redis_client.set(keys.preferences_rebuilt(), 1)  # no hourly rebuild puts the real ticks back meanwhile
    assert {notify(user, "task.comment", entity_id="t1") for _ in range(2)} == {Outcome.FOLDED}
    run_flush("test")
    assert sent(worker, user) == []
    flush_until(lambda: len(sent(worker, user)) == 1)
    assert sent(worker, user)[0][2] == 2
    while time.time() < ticks[0] + 0.5:
        time.sleep(0.1)  # until the first tick has passed: the cadence is about the clock
    assert {notify(user, "task.comment", entity_id="t1") for _ in range(3)} == {Outcome.FOLDED}
    run_flush("test")
    assert len(sent(worker, user)) == 1, "the second tick's events went out before it"
    flush_until(lambda: len(sent(worker, user)) == 2)
    assert [count for _id, _channel, count in sent(worker, user)] == [2, 3]


def test_a_throttled_users_excess_arrives_in_the_digest(worker, user):
    outcomes = [notify(user, "task.assigned", entity_id="t1", payload={"i": i}) for i in range(5)]
    assert outcomes == [Outcome.ACCEPTED] * 2 + [Outcome.FOLDED] * 3
    flush_until(lambda: len(sent(worker, user)) == 2 * 2 + 2)  # 2 singles and a digest, on 2 channels
    counts = Counter(count for _id, _channel, count in sent(worker, user))
    assert counts == {1: 4, 3: 2}
    assert read_counters()["folds:routine:throttle"] == 3


def test_the_books_balance_across_every_choice(worker, django_user_model, redis_client, settings):
    settings.SLUICE_QUEUES = {"routine": {"capacity": 3, "overflow": 100}}  # overflow folds join the others
    users = [django_user_model.objects.create_user(f"u{i}") for i in range(4)]
    preferences.set(users[0], kind="task.comment", mode="digest")
    preferences.set(users[1], kind="task.comment", mode="off")
    preferences.set(users[2], mode="instant")
    outcomes = Counter()
    for round_ in range(6):
        for user in users:
            outcomes[str(notify(user, "task.comment", entity_id=f"t{round_ % 2}"))] += 1
    calls = sum(outcomes.values())
    flush_until(
        lambda: (
            not redis_client.zcard(keys.pending())
            and not redis_client.llen("routine")
            and not redis_client.llen(keys.overflow("routine"))
            and sum(c for _i, _ch, c in sent(worker, users[0]) + sent(worker, users[3])) + outcomes["accepted"]
            >= outcomes["folded"]
        )
    )
    wait_for(lambda: settled("routine"), what="every send acked")
    every = [send for user in users for send in sent(worker, user)]
    singles = sum(1 for _id, _channel, count in every if count == 1 and not _id.startswith("digest-"))
    in_digests = sum(count for _id, _channel, count in every if _id.startswith("digest-"))
    assert singles == outcomes["accepted"] + outcomes["deferred"]
    assert in_digests == outcomes["folded"]
    assert singles + in_digests + outcomes["suppressed"] == calls
    assert outcomes["suppressed"] == 6
    assert sent(worker, users[1]) == []
    assert all(count == 1 for _id, _channel, count in sent(worker, users[2]))
    assert datetime.now(UTC)  # (the clock is the only thing not under test here)
