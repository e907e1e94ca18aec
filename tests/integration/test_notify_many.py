"""Issue 38: notify_many() decides each user exactly as notify() would, one round trip per chunk; a critical fan-out
larger than its room admits what fits and names the rest; unknown users are counted and named; bad input publishes
nothing; idempotency keys apply per user; with send_at every user's send is scheduled and moved in one call."""

import threading
import time
from collections import Counter
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from notifications import (
    InvalidPayload,
    Outcome,
    UnknownKind,
    UnknownUser,
    notify,
    notify_many,
    preferences,
)
from notifications.scheduling.models import ScheduledSend
from pipeline.admission import wire
from pipeline.metrics import read_counters
from pipeline.redis import keys
from tests.digest_helpers import published

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(60)]


@pytest.fixture
def kinds(settings):
    settings.SLUICE_KINDS = {
        **settings.SLUICE_KINDS,
        "task.assigned": {"class": "routine", "channels": ["email", "push"], "throttle": {"max": 2, "per_s": 60}},
    }


def evalsha_calls(client):
    return client.info("commandstats").get("cmdstat_evalsha", {}).get("calls", 0)


def quiet_now(user):
    zone = "UTC"
    now = datetime.now(ZoneInfo(zone))
    preferences.set_quiet_hours(user, zone, (now - timedelta(hours=1)).time(), (now + timedelta(hours=1)).time())


def give_choices(users):
    """Twins get the same choices: default, every kind off, task.assigned off on both channels, quiet hours now,
    instant delivery, and two task.assigned events already (the throttle's max)."""
    _default, off, kind_off, quiet, instant, throttled = users
    preferences.set(off, mode="off")
    preferences.set(kind_off, kind="task.assigned", mode="off")
    quiet_now(quiet)
    preferences.set(instant, mode="instant")
    for _ in range(2):
        notify(throttled, "task.assigned", entity_id="warm-up")


def test_each_user_is_decided_exactly_as_notify_decides_them(redis_client, make_users, kinds):
    singles, many = make_users(6, "a"), make_users(6, "b")
    give_choices(singles)
    give_choices(many)
    one_by_one = Counter(notify(u, "task.assigned", entity_id="t1", payload={"n": 1}) for u in singles)
    fanned = notify_many(many, "task.assigned", entity_id="t1", payload={"n": 1})
    assert fanned.counts == dict(one_by_one)
    # What each expected: the default accepted, "off" suppressed, quiet hours and the throttle folded, instant accepted.
    assert fanned.counts == {Outcome.ACCEPTED: 2, Outcome.SUPPRESSED: 2, Outcome.FOLDED: 2}
    assert (fanned.rejected, fanned.unknown, fanned.failed) == ([], [], [])
    counters = read_counters()
    assert (counters["folds:routine:quiet"], counters["folds:routine:throttle"]) == (2, 2)
    # The same users' messages went out, with the same channels.
    by_user = {m["user_id"]: m for m in published(redis_client) if m["entity_id"] == "t1"}
    for single, twin in zip(singles, many, strict=True):
        assert (single.pk in by_user) == (twin.pk in by_user)


def test_one_round_trip_per_chunk_of_users(redis_client, make_users, django_user_model):
    make_users(2 * wire.MAX_BATCH + 50)
    before = evalsha_calls(redis_client)
    result = notify_many(django_user_model.objects.all(), "board.updated", entity_id="b1")
    assert evalsha_calls(redis_client) - before == 3  # 450 users read from a QuerySet: three chunks, three steps
    assert result.counts == {Outcome.ACCEPTED: 2 * wire.MAX_BATCH + 50}
    assert redis_client.llen("background") == 2 * wire.MAX_BATCH + 50
    assert read_counters()["fanout:background:accepted"] == 2 * wire.MAX_BATCH + 50  # counted in the same steps


@pytest.mark.expected_errors("users of a notify_many rejected")
def test_a_critical_fan_out_admits_what_fits_and_names_exactly_the_rest(redis_client, make_users, settings):
    settings.SLUICE_QUEUES = {"critical": {"capacity": 5, "wait_ms": 100}}
    users = make_users(8)
    result = notify_many(users, "meeting.reminder", entity_id="m1")
    assert result.counts == {Outcome.ACCEPTED: 5}
    assert result.rejected == [u.pk for u in users[5:]]
    assert result.retry_after >= 1
    assert sorted(m["user_id"] for m in published(redis_client, "critical")) == sorted(u.pk for u in users[:5])
    assert read_counters()["notifications:critical:rejected"] == 3


def test_waiting_critical_users_get_in_as_room_frees_within_the_wait(redis_client, make_users, settings):
    settings.SLUICE_QUEUES = {"critical": {"capacity": 2, "wait_ms": 3000}}
    users = make_users(4)
    stop = threading.Event()

    def drain():  # a worker taking messages off the queue while the fan-out waits
        while not stop.is_set():
            redis_client.rpop("critical")
            time.sleep(0.02)

    threading.Thread(target=drain, daemon=True).start()
    try:
        result = notify_many(users, "meeting.reminder", entity_id="m1")
    finally:
        stop.set()
    assert result.counts == {Outcome.ACCEPTED: 4}
    assert result.rejected == []
    assert read_counters()["fanout:critical:accepted"] == 4  # two by admission's step, two after their wait


def test_unknown_users_are_counted_and_named_not_fatal(redis_client, make_users):
    [ada] = make_users(1)
    result = notify_many([ada, 987654, ada.pk, "not-a-pk"], "board.updated", entity_id="b1")
    assert result.counts == {Outcome.ACCEPTED: 1}  # ada once, however she is named
    assert result.unknown == [987654, "not-a-pk"]
    assert redis_client.llen("background") == 1
    assert read_counters()["fanout:background:unknown"] == 2


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda users: notify_many(users, "no.such.kind", entity_id="x"), UnknownKind),
        (lambda users: notify_many(users, "board.updated", entity_id="x", payload={"f": object()}), InvalidPayload),
        (lambda users: notify_many([*users, 3.5], "board.updated", entity_id="x"), UnknownUser),
        (lambda users: notify_many("ada", "board.updated", entity_id="x"), UnknownUser),
    ],
)
def test_bad_input_raises_before_anything_is_published(redis_client, make_users, call, error):
    users = make_users(wire.MAX_BATCH + 1)  # the bad user is in the second chunk: the first is not sent either
    with pytest.raises(error):
        call(users)
    assert redis_client.llen("background") == 0


def test_an_idempotency_key_applies_per_user(redis_client, make_users):
    users = make_users(3)
    first = notify_many(users[:2], "board.updated", entity_id="b1", idempotency_key="move-42")
    assert (first.counts, first.replayed) == ({Outcome.ACCEPTED: 2}, 0)
    again = notify_many(users, "board.updated", entity_id="b1", idempotency_key="move-42")
    assert (again.counts, again.replayed) == ({Outcome.ACCEPTED: 3}, 2)  # only the third user is new
    assert redis_client.llen("background") == 3
    # A notify() with the same key is another call: the keys of a fan-out are each user's own.
    assert notify(users[0], "board.updated", entity_id="b1", idempotency_key="move-42") is Outcome.ACCEPTED


def test_scheduling_many_schedules_then_moves_every_users_send(redis_client, make_users):
    users = make_users(5)
    when = time.time() + 600
    result = notify_many(users, "task.comment", entity_id="mtg_1", payload={"v": 1}, send_at=when, key="10m")
    assert (result.counts, result.moved) == ({Outcome.SCHEDULED: 5}, 0)
    moved = notify_many(users, "task.comment", entity_id="mtg_1", payload={"v": 2}, send_at=when + 3600, key="10m")
    assert (moved.counts, moved.moved) == ({Outcome.SCHEDULED: 5}, 5)
    rows = ScheduledSend.objects.all()
    assert rows.count() == 5
    assert {(row.version, row.payload, round(row.send_at.timestamp(), 3)) for row in rows} == {
        (2, '{"v":2}', round(when + 3600, 3))
    }
    assert redis_client.llen("routine") == 0


def test_a_scheduled_critical_fan_out_takes_the_seconds_that_fit_and_names_the_rest(redis_client, make_users, settings):
    settings.SLUICE_SCHEDULE = {"critical": {"rate_per_s": 5, "reservable": 0.8}}  # 4 a second
    users = make_users(10)
    when = int(time.time()) + 600
    result = notify_many(users, "meeting.reminder", entity_id="m1", send_at=when)  # no window: one second, 4 places
    assert result.counts == {Outcome.SCHEDULED: 4}
    assert result.rejected == [u.pk for u in users[4:]]
    assert result.available_at == when + 1
    assert ScheduledSend.objects.count() == 4
    assert redis_client.hget(keys.scheduled_slots("critical"), when) == b"4"


def test_the_bound_per_user_is_kept_by_name_in_a_fan_out(redis_client, make_users, settings):
    settings.SLUICE_SCHEDULE = {"max_per_user": 1}
    full, free = make_users(2)
    when = time.time() + 600
    notify(full, "task.comment", entity_id="other", send_at=when)
    result = notify_many([full, free], "task.comment", entity_id="mtg_1", send_at=when)
    assert result.counts == {Outcome.SCHEDULED: 1}
    assert result.schedule_full == [full.pk]


def test_moving_many_sends_writes_each_row_once_not_once_a_field(redis_client, make_users, settings):
    """Found by bench schedule --part move: moving 180 attendees' reminders by notify_many() wrote one CASE per field,
    each naming every row (Django's bulk_update), a cost that grows with the rows squared (1.3 s a call on SQLite).
    The SQL of a move now grows by a few characters a row: its primary key in one UPDATE's list."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    settings.SLUICE_SCHEDULE = {"critical": {"rate_per_s": 50, "reservable": 0.8}}  # 40 a second: three seconds
    settings.SLUICE_KINDS = {**settings.SLUICE_KINDS, "meeting.reminder": {"class": "critical", "channels": ["push"],
                                                                            "schedule_window_s": 120}}  # fmt: skip
    users = make_users(100)
    when = int(time.time()) + 600
    notify_many(users, "meeting.reminder", entity_id="m1", payload={"v": 1}, send_at=when, key="10m")
    with CaptureQueriesContext(connection) as queries:
        moved = notify_many(users, "meeting.reminder", entity_id="m1", payload={"v": 2}, send_at=when + 3600, key="10m")
    assert (moved.counts, moved.moved, moved.previous_sent) == ({Outcome.SCHEDULED: 100}, 100, 0)
    updates = [q["sql"] for q in queries.captured_queries if q["sql"].startswith("UPDATE")]
    assert sum(len(sql) for sql in updates) < 100 * 60, f"{len(updates)} UPDATEs of {sum(map(len, updates))} chars"
    rows = ScheduledSend.objects.all()
    assert {(row.version, row.payload, row.send_at.timestamp()) for row in rows} == {(2, '{"v":2}', when + 3600)}
    seconds = sorted(int(row.due_at.timestamp()) for row in rows)
    assert seconds == sorted(when + 3600 - n // 40 for n in range(100))  # each kept the second it took
    assert {int(k): int(v) for k, v in redis_client.hgetall(keys.scheduled_slots("critical")).items()} == {
        when + 3600: 40,
        when + 3599: 40,
        when + 3598: 20,
    }
