"""Issue 40: admission writes each decision to the activity log's buffer in the same step that makes it (notify(),
notify_many(), a critical's wait), within the buffer's bound, and not at all while the log is off."""

import time
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from notifications import Outcome, Rejected, notify, notify_many, preferences
from pipeline import activity_fields
from pipeline.redis import keys

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(60)]


def entries(client):
    return [activity_fields.decode(fields) for _id, fields in client.xrange(keys.activity())]


def evalsha_calls(client):
    return client.info("commandstats").get("cmdstat_evalsha", {}).get("calls", 0)


@pytest.fixture
def throttled_kind(settings):
    settings.SLUICE_KINDS = {
        **settings.SLUICE_KINDS,
        "task.assigned": {"class": "routine", "channels": ["email", "push"], "throttle": {"max": 1, "per_s": 60}},
    }


def test_an_accepted_event_is_one_entry_written_in_admissions_own_step(redis_client, user):
    notify(user, "task.comment", entity_id="warm-up")  # the script loaded once
    redis_client.delete(keys.activity(), "routine")
    before = evalsha_calls(redis_client)
    commands = redis_client.info("commandstats")
    assert notify(user, "task.comment", entity_id="t1", payload={"title": "Q3 plan", "body": "x" * 500}) is (
        Outcome.ACCEPTED
    )
    assert evalsha_calls(redis_client) == before + 1
    # No XADD of its own: the one script wrote it.
    assert (
        redis_client.info("commandstats").get("cmdstat_xadd", {}).get("calls", 0)
        == commands.get("cmdstat_xadd", {}).get("calls", 0) + 1
    )
    [entry] = entries(redis_client)
    assert entry == activity_fields.Entry(
        str(user.pk), "task.comment", "t1", entry.notification, "routine", "accepted", title="Q3 plan"
    )
    [message] = redis_client.lrange("routine", 0, -1)
    assert entry.notification.encode() in message  # the entry names the message's own notification id


def test_the_decisions_come_with_their_reasons(redis_client, user, django_user_model, settings, throttled_kind):
    settings.SLUICE_QUEUES = {"routine": {"capacity": 1}}
    off = django_user_model.objects.create_user("off", email="off@example.com")
    quiet = django_user_model.objects.create_user("quiet", email="quiet@example.com")
    preferences.set(off, kind="task.comment", mode="off")
    zone, now = "Europe/Berlin", datetime.now(ZoneInfo("Europe/Berlin"))
    preferences.set_quiet_hours(quiet, zone, (now - timedelta(hours=1)).time(), (now + timedelta(hours=1)).time())

    assert notify(user, "task.comment", entity_id="t1") is Outcome.ACCEPTED
    assert notify(user, "task.comment", entity_id="t1") is Outcome.FOLDED  # the queue holds its capacity
    assert notify(off, "task.comment", entity_id="t1") is Outcome.SUPPRESSED
    redis_client.delete("routine")
    assert notify(quiet, "task.comment", entity_id="t2") is Outcome.FOLDED
    assert notify(user, "task.assigned", entity_id="a1") is Outcome.ACCEPTED
    redis_client.delete("routine")
    assert notify(user, "task.assigned", entity_id="a2") is Outcome.FOLDED  # one a minute
    assert notify(user, "task.comment", entity_id="k", idempotency_key="once") is Outcome.ACCEPTED
    assert notify(user, "task.comment", entity_id="k", idempotency_key="once") is Outcome.ACCEPTED

    steps = [(e.user, e.outcome, e.reason) for e in entries(redis_client)]
    u, o, q = str(user.pk), str(off.pk), str(quiet.pk)
    assert steps == [
        (u, "accepted", ""),
        (u, "folded", "overflow"),
        (o, "suppressed", "off"),
        (q, "deferred", "quiet"),
        (u, "accepted", ""),
        (u, "throttled", "throttle"),
        (u, "accepted", ""),
        (u, "replayed", ""),
    ]
    log = entries(redis_client)
    assert log[1].fold == keys.fold_member(user.pk, "task.comment", "t1")
    held_until = float(log[3].detail)
    assert abs(held_until - (time.time() + 3600)) < 120  # the quiet hours' end
    assert log[7].detail == "accepted"  # a replay names the first call's outcome


@pytest.mark.expected_errors("critical queue 'critical' full")
def test_a_critical_rejected_after_its_wait_is_an_entry_with_its_retry_after(redis_client, user, settings):
    settings.SLUICE_QUEUES = {"critical": {"capacity": 1, "wait_ms": 20}}
    notify(user, "meeting.reminder", entity_id="m1")
    with pytest.raises(Rejected) as refused:
        notify(user, "meeting.reminder", entity_id="m2", payload={"title": "Daily"})
    last = entries(redis_client)[-1]
    assert (last.outcome, last.reason, last.entity, last.title) == ("rejected", "full", "m2", "Daily")
    assert float(last.detail) == refused.value.retry_after


def test_notify_many_writes_one_entry_per_user_in_its_batch_step(redis_client, django_user_model):
    users = [django_user_model.objects.create_user(f"m{i}", email=f"m{i}@example.com") for i in range(5)]
    notify_many(users[:1], "task.comment", entity_id="warm-up")  # the script loaded once
    redis_client.delete(keys.activity())
    before = evalsha_calls(redis_client)
    result = notify_many(users, "task.comment", entity_id="t9", payload={"title": "Launch"})
    assert result.counts == {Outcome.ACCEPTED: 5}
    assert evalsha_calls(redis_client) == before + 1
    log = entries(redis_client)
    assert sorted(e.user for e in log) == sorted(str(u.pk) for u in users)
    assert {(e.outcome, e.title, e.entity) for e in log} == {("accepted", "Launch", "t9")}
    assert len({e.notification for e in log}) == 5


def test_the_buffer_stays_near_its_bound(redis_client, user, settings):
    settings.SLUICE_ACTIVITY = {"buffer_entries": 100}
    settings.SLUICE_QUEUES = {"background": {"capacity": 5}}
    for i in range(600):
        notify(user, "board.updated", entity_id=f"b{i % 7}")
    info = redis_client.xinfo_stream(keys.activity())
    # MAXLEN ~ trims whole nodes: the stream keeps its bound and at most one node (100 entries) more.
    assert 100 <= info["length"] <= 200
    assert info["entries-added"] == 600


def test_with_the_log_off_nothing_is_written(redis_client, user, settings):
    settings.SLUICE_ACTIVITY = {"enabled": False}
    assert notify(user, "task.comment", entity_id="t1") is Outcome.ACCEPTED
    notify_many([user], "task.comment", entity_id="t2")
    assert not redis_client.exists(keys.activity())
