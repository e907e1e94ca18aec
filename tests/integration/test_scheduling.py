"""Issue 37: scheduled sends. notify(send_at=...) schedules and publishes nothing; the same identity moves it, in one
step; cancel_scheduled() cancels all or some; the mover publishes each once at its time, decided by the user's choices
of that time; a critical kind reserves a second of its pool's rate, or is refused when scheduled; bad times and the
bounds are refused by name."""

import time
from collections import Counter
from datetime import UTC, datetime

import pytest

from notifications import InvalidSchedule, Outcome, Rejected, ScheduleFull, cancel_scheduled, notify, preferences
from notifications.scheduling import mover, stager
from notifications.scheduling.models import PENDING, PUBLISHING, ScheduledSend
from pipeline.admission import schedule as staging
from pipeline.redis import keys
from tests.digest_helpers import published

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(60)]
ROUTINE, CRITICAL = "task.comment", "meeting.reminder"


def soon(seconds=60):
    return time.time() + seconds


def at(seconds):
    return datetime.fromtimestamp(seconds, UTC)


def test_a_scheduled_send_publishes_nothing_until_its_time_then_once(user, redis_client):
    when = soon(30)
    assert notify(user, ROUTINE, entity_id="t1", payload={"title": "Plan"}, send_at=when) == Outcome.SCHEDULED
    assert redis_client.llen("routine") == 0
    [row] = ScheduledSend.objects.all()
    assert (row.kind, row.entity_id, row.key, row.state, row.version) == (ROUTINE, "t1", "", PENDING, 1)
    assert redis_client.zscore(keys.scheduled_due("routine"), row.pk) == pytest.approx(when)

    assert mover.drain("routine", now=when - 1) == {"published": 0, "waiting": 0, "dropped": 0}  # not due yet
    assert mover.drain("routine", now=when + 0.1)["published"] == 1
    [sent] = published(redis_client)
    assert (sent["kind"], sent["entity_id"], sent["payload"]) == (ROUTINE, "t1", {"title": "Plan"})
    assert sent["send_at"] == pytest.approx(when)
    assert not ScheduledSend.objects.exists()
    assert mover.drain("routine", now=when + 1)["published"] == 0  # once


def test_scheduling_the_same_identity_again_moves_it(user, redis_client):
    first, second = soon(30), soon(300)
    notify(user, ROUTINE, entity_id="t1", payload={"v": 1}, send_at=first, key="10m")
    notify(user, ROUTINE, entity_id="t1", payload={"v": 2}, send_at=second, key="10m")
    notify(user, ROUTINE, entity_id="t1", payload={"v": 3}, send_at=first, key="1d")  # another key: another send
    rows = {row.key: row for row in ScheduledSend.objects.all()}
    assert set(rows) == {"10m", "1d"}
    assert (rows["10m"].version, rows["10m"].payload, rows["10m"].send_at) == (2, '{"v":2}', at(second))
    # The old time finds the moved one not due: nothing goes out then, and it is staged at its new time.
    assert mover.drain("routine", now=first + 1)["published"] == 1  # only the "1d" one
    assert [m["payload"] for m in published(redis_client)] == [{"v": 3}]
    assert redis_client.zscore(keys.scheduled_due("routine"), rows["10m"].pk) == pytest.approx(second)
    mover.drain("routine", now=second + 1)
    assert [m["payload"] for m in published(redis_client)] == [{"v": 3}, {"v": 2}]


def test_a_move_racing_the_due_time_either_replaces_it_or_says_the_old_one_went(user, redis_client):
    from notifications.api import notify_in_scope

    when = soon(10)
    notify(user, ROUTINE, entity_id="t1", payload={"v": 1}, send_at=when)
    [row] = ScheduledSend.objects.all()
    # The mover has taken it (it is being published) when the move comes.
    assert [r.pk for r in mover._take("routine", [row.pk], when + 1, "mover-1")] == [row.pk]
    moved = notify_in_scope("notify", user, ROUTINE, entity_id="t1", payload={"v": 2}, send_at=soon(120))
    assert (moved.outcome, moved.moved, moved.previous_sent) == (Outcome.SCHEDULED, False, True)
    assert sorted(ScheduledSend.objects.values_list("state", flat=True)) == [PENDING, PUBLISHING]
    # The old one goes out (its mover finishes it, or whoever takes it over: here, once its lease ran out), the new
    # one at its own time: each once.
    mover.publish("routine", [row.pk], when + mover.LEASE_S + 2)
    assert [m["payload"] for m in published(redis_client)] == [{"v": 1}]
    mover.drain("routine", now=soon(121))
    assert [m["payload"] for m in published(redis_client)] == [{"v": 1}, {"v": 2}]


def test_cancel_all_or_some_users_and_keys(user, django_user_model, redis_client):
    bob = django_user_model.objects.create_user("bob")
    for who in (user, bob):
        for key in ("1d", "10m"):
            notify(who, ROUTINE, entity_id="m1", send_at=soon(60), key=key)
    notify(user, ROUTINE, entity_id="m2", send_at=soon(60))
    assert cancel_scheduled(ROUTINE, "m1", users=[bob], key="10m") == 1
    assert cancel_scheduled(ROUTINE, "m1", users=[user.pk]) == 2
    assert cancel_scheduled(ROUTINE, "m1") == 1  # bob's "1d"
    assert cancel_scheduled(ROUTINE, "m1") == 0
    assert list(ScheduledSend.objects.values_list("entity_id", flat=True)) == ["m2"]
    assert mover.drain("routine", now=soon(61))["published"] == 1


def test_the_users_choices_of_the_due_time_decide_it(user, redis_client, django_capture_on_commit_callbacks):
    when = soon(20)
    notify(user, ROUTINE, entity_id="t1", send_at=when)
    with django_capture_on_commit_callbacks(execute=True):
        preferences.set(user, kind=ROUTINE, mode="off")  # after scheduling, before its time
    assert mover.drain("routine", now=when + 1)["published"] == 1  # taken: suppressed by the choice
    assert redis_client.llen("routine") == 0
    assert not ScheduledSend.objects.exists()


def test_expiry_counts_from_send_at(user, redis_client, settings):
    settings.SLUICE_KINDS = {**settings.SLUICE_KINDS, "login.code": {"class": "critical", "channels": ["sms"],
                                                                       "expires_after_s": 300}}  # fmt: skip
    when = soon(3600)
    notify(user, "login.code", entity_id="c1", send_at=when)
    mover.drain("critical", now=when + 1)
    [sent] = published(redis_client, "critical")
    assert sent["expires_at"] == pytest.approx(when + 300, abs=1)


@pytest.mark.parametrize(
    ("send_at", "words"),
    [
        (lambda: time.time() - 5, "is in the past"),
        (lambda: time.time() + 401 * 86400, "SLUICE_SCHEDULE['horizon_days'] (400)"),
        (lambda: datetime(2030, 1, 1), "aware datetime"),
        (lambda: "tomorrow", "aware datetime or Unix seconds"),
    ],
    ids=["past", "past the horizon", "naive", "text"],
)
def test_bad_times_are_refused_by_name_and_nothing_is_scheduled(user, redis_client, send_at, words):
    with pytest.raises(InvalidSchedule, match=words.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        notify(user, ROUTINE, entity_id="t1", send_at=send_at())
    assert not ScheduledSend.objects.exists()


def test_a_key_needs_a_time(user, redis_client):
    with pytest.raises(InvalidSchedule, match="it needs send_at"):
        notify(user, ROUTINE, entity_id="t1", key="10m")


def test_the_bound_per_user_is_refused_by_name(user, redis_client, settings):
    settings.SLUICE_SCHEDULE = {"max_per_user": 2}
    notify(user, ROUTINE, entity_id="a", send_at=soon())
    notify(user, ROUTINE, entity_id="b", send_at=soon())
    notify(user, ROUTINE, entity_id="b", send_at=soon(90))  # a move: no new row
    with pytest.raises(ScheduleFull, match=r"SLUICE_SCHEDULE\['max_per_user'\]"):
        notify(user, ROUTINE, entity_id="c", send_at=soon())
    assert ScheduledSend.objects.count() == 2


def test_a_critical_send_reserves_a_second_of_its_window_or_is_refused_now(user, redis_client, settings):
    settings.SLUICE_SCHEDULE = {"critical": {"rate_per_s": 2, "reservable": 1}}
    settings.SLUICE_KINDS = {**settings.SLUICE_KINDS, CRITICAL: {"class": "critical", "channels": ["push"],
                                                                 "schedule_window_s": 2}}  # fmt: skip
    when = int(soon(600))
    for n in range(4):  # 2 a second, in the 2 seconds of the window: window × rate
        notify(user, CRITICAL, entity_id=f"m{n}", send_at=when)
    seconds = sorted(int(row.due_at.timestamp()) for row in ScheduledSend.objects.all())
    assert seconds == [when - 1, when - 1, when, when]  # the latest second with room first, never after send_at
    with pytest.raises(Rejected) as refused:
        notify(user, CRITICAL, entity_id="m4", send_at=when)
    assert refused.value.available_at == when + 1  # the earliest second with room
    assert ScheduledSend.objects.count() == 4
    # A move releases its second and takes one in its new window; a cancel releases its own.
    notify(user, CRITICAL, entity_id="m0", send_at=when + 100)
    notify(user, CRITICAL, entity_id="m4", send_at=when)
    assert cancel_scheduled(CRITICAL, "m1") == 1
    notify(user, CRITICAL, entity_id="m5", send_at=when)
    counts = redis_client.hgetall(keys.scheduled_slots("critical"))
    assert {int(k): int(v) for k, v in counts.items()} == {when - 1: 2, when: 2, when + 100: 1}


def test_a_critical_send_without_a_window_goes_out_at_its_send_at_not_at_its_seconds_start(user, redis_client):
    """Found by bench schedule: a reserved send was published at the start of its reserved second, so a kind with no
    window (0: never early) sent up to a second before its send_at."""
    when = int(soon(600)) + 0.7
    notify(user, CRITICAL, entity_id="m1", send_at=when)
    [row] = ScheduledSend.objects.all()
    assert row.due_at == at(when)
    assert redis_client.hget(keys.scheduled_slots("critical"), int(when)) == b"1"  # its second's place
    assert mover.drain("critical", now=int(when) + 0.1)["published"] == 0
    assert mover.drain("critical", now=when + 0.01)["published"] == 1


def test_a_window_reaching_back_past_now_reserves_no_second_gone_by(user, redis_client, settings):
    """Found by bench schedule: a reminder scheduled less than its window ahead took seconds already gone by, so the
    mover published those at once, all together: more than the pool drains in the second they went out in."""
    settings.SLUICE_SCHEDULE = {"critical": {"rate_per_s": 2, "reservable": 1}}
    settings.SLUICE_KINDS = {**settings.SLUICE_KINDS, CRITICAL: {"class": "critical", "channels": ["push"],
                                                                 "schedule_window_s": 120}}  # fmt: skip
    began = time.time()
    when = int(began) + 3
    refused = []
    for n in range(12):
        try:
            notify(user, CRITICAL, entity_id=f"m{n}", send_at=when)
        except Rejected as exc:
            refused.append(exc.available_at)
    seconds = [int(row.due_at.timestamp()) for row in ScheduledSend.objects.all()]
    assert min(seconds) >= int(began)  # from this second on, never before
    assert max(Counter(seconds).values()) == 2
    assert len(seconds) <= 8  # the 4 seconds from now to send_at's, 2 each
    assert refused
    assert set(refused) == {when + 1}


def test_a_redis_that_lost_its_data_loses_no_scheduled_send(user, redis_client, settings):
    settings.SLUICE_SCHEDULE = {"staged_s": 60}
    near, far = soon(30), soon(7200)
    notify(user, CRITICAL, entity_id="near", send_at=near)
    notify(user, CRITICAL, entity_id="far", send_at=far)
    stager.stage_window("critical")
    assert staging.reserved_within("critical", 7300) == 2
    redis_client.flushdb()  # a restart without persistence
    assert stager.stage_window("critical") == 1  # the near one staged again; the reservations rebuilt
    assert staging.reserved_within("critical", 7300) == 2
    mover.drain("critical", now=near + 1)
    stager.stage_window("critical", now=far - 30)
    mover.drain("critical", now=far + 1)
    assert sorted(m["entity_id"] for m in published(redis_client, "critical")) == ["far", "near"]


def test_an_idempotency_key_replays_a_schedule(user, redis_client):
    when = soon(60)
    assert notify(user, ROUTINE, entity_id="t1", send_at=when, idempotency_key="k1") == Outcome.SCHEDULED
    assert notify(user, ROUTINE, entity_id="t1", send_at=soon(999), idempotency_key="k1") == Outcome.SCHEDULED
    [row] = ScheduledSend.objects.all()
    assert row.send_at == at(when)  # the replay changed nothing


def test_a_mover_killed_after_admitting_is_taken_over_without_a_second_publish(user, redis_client):
    when = soon(5)
    notify(user, ROUTINE, entity_id="t1", send_at=when)
    [row] = ScheduledSend.objects.all()
    ids = staging.claim_due("routine", 30, 10, when + 1)
    rows = mover._take("routine", ids, when + 1, "dead-mover")
    mover._admit("routine", rows)  # published, and then the mover died: its row and claim stay
    assert redis_client.llen("routine") == 1
    # Once the leases ran out the next mover takes it over: the admission replays, nothing is published twice.
    assert mover.drain("routine", now=when + mover.LEASE_S + 2)["published"] == 1
    assert redis_client.llen("routine") == 1
    assert not ScheduledSend.objects.exists()
    assert redis_client.get(keys.idempotency(mover.SCOPE, f"{row.pk}:1")) == b"accepted"


def test_the_movers_thread_publishes_a_send_within_a_tick_of_its_time(user, redis_client):
    import threading

    from notifications.scheduling import runner
    from tests.waiting import wait_for

    when = time.time() + 0.5
    notify(user, ROUTINE, entity_id="t1", send_at=when)
    stop = threading.Event()
    thread = threading.Thread(target=runner.run, args=("routine", stop))
    thread.start()
    try:
        wait_for(lambda: redis_client.llen("routine") == 1, timeout=10, what="the send published")
        late = time.time() - when
    finally:
        stop.set()
        thread.join(timeout=10)
    assert late < 5  # within ticks, not a beat interval (the figures: bench schedule)
    assert not ScheduledSend.objects.exists()
