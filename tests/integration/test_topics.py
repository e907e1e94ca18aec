"""Issue 38's topics: subscribe() and unsubscribe() in bulk and idempotent; notify_topic() validates everything before
it records a job, then a step of the kind's class fans it out to every subscriber, each decided as notify() decides
them; a job resumed after a step died mid-chunk skips the users it admitted; a critical fan-out with no room counts
its rejected subscribers on the job."""

import time
from collections import Counter

import pytest

from notifications import (
    InvalidPayload,
    InvalidTopic,
    UnknownKind,
    UnknownUser,
    notify_topic,
    preferences,
    subscribe,
    unsubscribe,
)
from notifications.fanout import fan_out
from notifications.scheduling.models import ScheduledSend
from notifications.topics import steps, tasks
from notifications.topics.models import DONE, FAILED, FANNING, Subscription, TopicFanout
from pipeline import housekeeping
from pipeline.admission import wire
from pipeline.metrics import read_counters
from pipeline.observe import fanout_metrics
from pipeline.redis import keys
from tests.digest_helpers import published

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(60)]


def sends(client, queue="background"):
    """The send messages in ``queue`` (the fan-out's own step messages left out), by user."""
    return Counter(m["user_id"] for m in published(client, queue) if "user_id" in m)


def finish(klass="background"):
    """Run the class's fan-outs to the end in this process, as the steps of a worker would."""
    return steps.run(klass, housekeeping.unbounded())


def test_subscribe_and_unsubscribe_are_bulk_idempotent_and_count(make_users, django_user_model, redis_client):
    users = make_users(5)
    assert subscribe("board:b1", users[:3]) == 3
    assert subscribe("board:b1", [users[0].pk, users[3], users[3].pk]) == 1  # ada again, and one new, once
    assert subscribe("board:b1", django_user_model.objects.all()) == 1  # a QuerySet: the one left
    assert subscribe("board:b2", users[:1]) == 1
    assert Subscription.objects.filter(topic="board:b1").count() == 5
    assert unsubscribe("board:b1", [users[0], users[1].pk, 987654]) == 2  # an unknown user counts nothing
    assert unsubscribe("board:b1", [users[0]]) == 0
    assert unsubscribe("board:b1", django_user_model.objects.filter(pk=users[2].pk)) == 1
    assert sorted(Subscription.objects.filter(topic="board:b1").values_list("user_id", flat=True)) == [
        users[3].pk,
        users[4].pk,
    ]
    assert Subscription.objects.filter(topic="board:b2").count() == 1


def test_subscribing_an_unknown_user_adds_nothing(make_users, redis_client):
    users = make_users(2)
    with pytest.raises(UnknownUser, match="987654"):
        subscribe("board:b1", [*users, 987654])
    assert not Subscription.objects.exists()


@pytest.mark.parametrize(
    ("topic", "words"),
    [("", "must not be empty"), (12, "must be a string"), ("a" * 201, "the limit is 200"), ("a\nb", "control")],
)
def test_a_bad_topic_raises_and_stores_nothing(make_users, topic, words, redis_client):
    [ada] = make_users(1)
    with pytest.raises(InvalidTopic, match=words):
        subscribe(topic, [ada])
    with pytest.raises(InvalidTopic, match=words):
        notify_topic(topic, "board.updated", entity_id="b1")
    assert not Subscription.objects.exists()
    assert not TopicFanout.objects.exists()


@pytest.mark.parametrize(
    ("kind", "payload", "error"),
    [("no.such.kind", {}, UnknownKind), ("board.updated", {"x": object()}, InvalidPayload)],
)
def test_bad_input_records_and_publishes_nothing(make_users, redis_client, kind, payload, error):
    subscribe("board:b1", make_users(3))
    with pytest.raises(error):
        notify_topic("board:b1", kind, entity_id="b1", payload=payload)
    assert not TopicFanout.objects.exists()
    assert redis_client.llen("background") == 0


def test_every_subscriber_gets_the_event_once_decided_as_notify_decides_them(make_users, redis_client):
    users = make_users(2 * wire.MAX_BATCH + 7)
    subscribe("board:b1", users)
    preferences.set(users[0], mode="off")  # opted out of everything: suppressed
    job = notify_topic("board:b1", "board.updated", entity_id="b1", payload={"title": "Moved"})
    assert (job.subscribers, job.state, job.klass) == (len(users), FANNING, "background")
    # notify_topic asked for a step on the kind's class's pool, and recorded the backlog.
    assert any(m.get("klass") == "background" for m in published(redis_client, "background"))
    assert int(redis_client.hget(keys.topic_backlog("background"), job.token)) == len(users)
    assert finish() == len(users)
    job.refresh_from_db()
    assert (job.state, job.done, job.rejected) == (DONE, len(users), 0)
    assert job.counts == {"accepted": len(users) - 1, "suppressed": 1}
    assert sends(redis_client) == Counter({u.pk: 1 for u in users[1:]})
    assert not redis_client.hexists(keys.topic_backlog("background"), job.token)
    assert read_counters()["fanout:background:accepted"] == len(users) - 1


def test_a_step_that_died_mid_chunk_is_resumed_without_sending_twice(make_users, redis_client):
    users = make_users(wire.MAX_BATCH + 50)
    subscribe("board:b1", users)
    job = notify_topic("board:b1", "board.updated", entity_id="b1")
    steps.advance(job)  # the first chunk, its cursor moved
    # The second chunk admitted by a step that was killed before it moved the cursor: its events are out.
    rest = list(Subscription.objects.filter(topic="board:b1", pk__gt=job.cursor).values_list("user_id", flat=True))
    from notifications.api import _validate

    template = _validate(None, "board.updated", "b1", {}, None, steps.SCOPE, unknown_user=True)
    fan_out(template, rest[:20], idempotency=(steps.SCOPE, job.token))
    assert finish() == 50
    job.refresh_from_db()
    assert (job.state, job.done) == (DONE, len(users))
    assert sends(redis_client) == Counter({u.pk: 1 for u in users})
    # The replayed users count once, as what they got the first time.
    assert job.counts == {"accepted": len(users)}


def test_a_step_stops_at_its_budget_and_asks_for_the_next(make_users, redis_client):
    users = make_users(2 * wire.MAX_BATCH)
    subscribe("board:b1", users)
    job = notify_topic("board:b1", "board.updated", entity_id="b1")
    with housekeeping.step(tasks.STEP_TASK, "background", redis_client, budget_s=0) as step:
        assert steps.run("background", step) == wire.MAX_BATCH  # one chunk a step at least, then its budget is over
    assert step.more
    job.refresh_from_db()
    assert (job.state, job.done) == (FANNING, wire.MAX_BATCH)
    assert int(redis_client.hget(keys.topic_backlog("background"), job.token)) == wire.MAX_BATCH
    served = {family.name: family for family in fanout_metrics.collect(read_counters())}
    backlog = {s.labels["class"]: s.value for s in served["sluice_topic_fanout_backlog"].samples}
    assert backlog == {"critical": 0, "routine": 0, "background": wire.MAX_BATCH}
    users_total = {(s.labels["class"], s.labels["outcome"]): s.value for s in served["sluice_fanout_users"].samples}
    assert users_total[("background", "accepted")] == wire.MAX_BATCH
    assert tasks.tick() == ["background"]  # beat's tick asks for the next step
    assert tasks.tick() == []  # which waits in the queue: no second one


def test_the_same_idempotency_key_returns_the_first_job(make_users, redis_client):
    subscribe("board:b1", make_users(3))
    first = notify_topic("board:b1", "board.updated", entity_id="b1", idempotency_key="k1")
    again = notify_topic("board:b1", "board.updated", entity_id="b1", idempotency_key="k1")
    assert (again.pk, again.replayed, first.replayed) == (first.pk, True, False)
    assert TopicFanout.objects.count() == 1


def test_a_topic_without_subscribers_is_done_at_once(redis_client):
    job = notify_topic("board:nobody", "board.updated", entity_id="b1")
    assert (job.subscribers, job.state) == (0, DONE)
    assert redis_client.llen("background") == 0


@pytest.mark.expected_errors("users of a notify_many rejected")
def test_a_critical_fan_out_with_no_room_counts_its_rejected_subscribers(make_users, redis_client, settings):
    settings.SLUICE_QUEUES = {"critical": {"capacity": 5, "wait_ms": 50}}
    users = make_users(8)
    subscribe("meeting:m1", users)
    job = notify_topic("meeting:m1", "meeting.reminder", entity_id="m1")
    assert job.klass == "critical"
    redis_client.delete("critical")  # the step message notify_topic asked for: this test runs the step itself
    finish("critical")
    job.refresh_from_db()
    assert (job.state, job.done, job.rejected) == (DONE, 8, 3)
    assert job.counts == {"accepted": 5, "rejected": 3}
    assert sum(sends(redis_client, "critical").values()) == 5


@pytest.mark.expected_errors("cannot go on")
def test_a_job_whose_kind_was_removed_fails_loudly(make_users, redis_client, settings):
    subscribe("board:b1", make_users(2))
    job = notify_topic("board:b1", "board.updated", entity_id="b1")
    TopicFanout.objects.filter(pk=job.pk).update(kind="gone.kind")
    finish()
    job.refresh_from_db()
    assert job.state == FAILED
    assert "gone.kind" in job.error


def test_send_at_schedules_every_subscribers_send(make_users, redis_client):
    users = make_users(3)
    subscribe("meeting:m1", users)
    job = notify_topic("meeting:m1", "board.updated", entity_id="m1", send_at=time.time() + 3600, key="1h")
    finish()
    job.refresh_from_db()
    assert (job.state, job.counts) == (DONE, {"scheduled": 3})
    assert sorted(ScheduledSend.objects.values_list("user_id", flat=True)) == sorted(u.pk for u in users)
    assert set(ScheduledSend.objects.values_list("key", flat=True)) == {"1h"}
