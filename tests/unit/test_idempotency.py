"""Idempotency keys through notify(): a repeat returns the first call's outcome and publishes nothing."""

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from notifications import InvalidIdempotencyKey, NotifyError, Outcome, Rejected, notify, notify_on_commit
from notifications.api import NOTIFY_SCOPE, notify_in_scope
from pipeline.admission import wire
from pipeline.admission.bounded_push import push
from pipeline.admission.event import Event
from pipeline.conf import sluice_settings
from pipeline.metrics import idempotent_replay_field, read_counters
from pipeline.redis import keys
from tests.waiting import wait_for

CRITICAL, ROUTINE, BACKGROUND = "meeting.reminder", "task.assigned", "board.updated"


def replays(klass):
    return read_counters().get(idempotent_replay_field(klass), 0)


def recorded(client, key, scope=NOTIFY_SCOPE):
    value = client.get(keys.idempotency(scope, key))
    return value.decode() if value is not None else None


@pytest.mark.parametrize(("kind", "queue"), [(CRITICAL, "critical"), (ROUTINE, "routine"), (BACKGROUND, "background")])
def test_the_same_key_twice_publishes_once_and_returns_the_first_outcome(redis_client, user, kind, queue):
    first = notify(user, kind, entity_id="e1", payload={"n": 1}, idempotency_key="order-42")
    second = notify(user, kind, entity_id="e1", payload={"n": 2}, idempotency_key="order-42")
    assert first is second is Outcome.ACCEPTED
    assert redis_client.llen(queue) == 1
    assert replays(sluice_settings().kinds[kind].klass) == 1
    assert recorded(redis_client, "order-42") == "accepted"
    # A call without a key, or with another, is a new event.
    assert notify(user, kind, entity_id="e1") is Outcome.ACCEPTED
    assert notify(user, kind, entity_id="e1", idempotency_key="order-43") is Outcome.ACCEPTED
    assert redis_client.llen(queue) == 3


@pytest.mark.parametrize(("kind", "outcome"), [(ROUTINE, Outcome.FOLDED), (BACKGROUND, Outcome.COLLAPSED)])
def test_a_replay_returns_the_recorded_outcome_even_when_the_queue_has_room_again(
    redis_client, user, settings, kind, outcome
):
    settings.SLUICE_QUEUES = {"routine": {"capacity": 1}, "background": {"capacity": 1}}
    assert notify(user, kind, entity_id="filler") is Outcome.ACCEPTED
    assert notify(user, kind, entity_id="e1", idempotency_key="k") is outcome
    queue = sluice_settings().kinds[kind].klass
    redis_client.delete(queue)
    pending = redis_client.zcard(keys.pending())
    assert notify(user, kind, entity_id="e1", idempotency_key="k") is outcome
    assert redis_client.llen(queue) == 0
    assert redis_client.zcard(keys.pending()) == pending  # not folded twice either


def test_a_suppressed_outcome_is_recorded_and_replayed(redis_client, user):
    from notifications import preferences

    preferences.set(user, kind=ROUTINE, channel="email", mode="off")
    preferences.set(user, kind=ROUTINE, channel="push", mode="off")
    preferences.write_mirror([user.pk])
    assert notify(user, ROUTINE, entity_id="e1", idempotency_key="k") is Outcome.SUPPRESSED
    assert notify(user, ROUTINE, entity_id="e1", idempotency_key="k") is Outcome.SUPPRESSED
    assert recorded(redis_client, "k") == "suppressed"
    assert replays("routine") == 1


def test_scopes_do_not_collide(redis_client, user):
    assert notify(user, ROUTINE, entity_id="e1", idempotency_key="k") is Outcome.ACCEPTED
    assert notify_in_scope("ingest:billing", user, ROUTINE, entity_id="e1", idempotency_key="k").replayed is False
    assert notify_in_scope("ingest:crm", user, ROUTINE, entity_id="e1", idempotency_key="k").replayed is False
    again = notify_in_scope("ingest:crm", user, ROUTINE, entity_id="e1", idempotency_key="k")
    assert again == (Outcome.ACCEPTED, True)
    assert redis_client.llen("routine") == 3
    assert len({keys.idempotency(scope, "k") for scope in ("notify", "ingest:billing", "ingest:crm")}) == 3


def test_the_key_name_is_bounded_whatever_the_callers_key(redis_client):
    short, long = keys.idempotency(NOTIFY_SCOPE, "abcde"), keys.idempotency(NOTIFY_SCOPE, "x" * 255)
    assert len(short) == len(long) == len("sluice:idem:") + 22
    assert short != long


def test_after_the_ttl_the_key_is_forgotten_and_the_event_publishes_again(redis_client, user, settings):
    settings.SLUICE_IDEMPOTENCY_TTL_S = 1
    assert notify(user, ROUTINE, entity_id="e1", idempotency_key="k") is Outcome.ACCEPTED
    assert 0 < redis_client.ttl(keys.idempotency(NOTIFY_SCOPE, "k")) <= 1
    wait_for(lambda: recorded(redis_client, "k") is None, timeout=5, what="the idempotency key to expire")
    assert notify(user, ROUTINE, entity_id="e1", idempotency_key="k") is Outcome.ACCEPTED
    assert redis_client.llen("routine") == 2


def test_the_default_ttl_is_a_day(redis_client, user):
    assert sluice_settings().idempotency_ttl_s == 86_400
    notify(user, ROUTINE, entity_id="e1", idempotency_key="k")
    assert 86_000 < redis_client.ttl(keys.idempotency(NOTIFY_SCOPE, "k")) <= 86_400


@pytest.mark.expected_errors("for the whole wait budget: rejecting")
def test_a_rejected_critical_records_nothing_so_its_retry_can_succeed(redis_client, user, settings):
    settings.SLUICE_QUEUES = {"critical": {"capacity": 1, "wait_ms": 0}}
    assert notify(user, CRITICAL, entity_id="filler") is Outcome.ACCEPTED
    with pytest.raises(Rejected):
        notify(user, CRITICAL, entity_id="e1", idempotency_key="k")
    assert recorded(redis_client, "k") is None
    redis_client.rpop("critical")  # a worker took the filler: room again
    assert notify(user, CRITICAL, entity_id="e1", idempotency_key="k") is Outcome.ACCEPTED
    assert redis_client.llen("critical") == 1
    assert replays("critical") == 0


def evals(client):
    stats = client.info("commandstats")
    return sum(stats.get(f"cmdstat_{name}", {"calls": 0})["calls"] for name in ("evalsha", "eval"))


def test_a_critical_waiting_for_room_publishes_once_beside_a_duplicate(redis_client, user, settings):
    settings.SLUICE_QUEUES = {"critical": {"capacity": 1, "wait_ms": 5000}}
    assert notify(user, CRITICAL, entity_id="filler") is Outcome.ACCEPTED
    outcomes = []
    before = evals(redis_client)
    waiter = threading.Thread(
        target=lambda: outcomes.append(notify(user, CRITICAL, entity_id="e1", idempotency_key="k"))
    )
    waiter.start()
    # Its admission found the queue full (nothing recorded): it now polls for room with the bounded push.
    wait_for(lambda: evals(redis_client) >= before + 2, timeout=5, what="the waiter to admit, then poll")
    assert recorded(redis_client, "k") is None
    redis_client.rpop("critical")
    outcomes.append(notify(user, CRITICAL, entity_id="e1", idempotency_key="k"))
    waiter.join(timeout=10)
    assert outcomes == [Outcome.ACCEPTED, Outcome.ACCEPTED]
    assert redis_client.llen("critical") == 1
    assert replays("critical") == 1


def test_the_bounded_push_records_the_key_and_refuses_a_second_push(redis_client):
    kind = sluice_settings().kinds[CRITICAL]
    key = keys.idempotency(NOTIFY_SCOPE, "k")
    keyed = Event(kind, "n1", 1, "e1", "{}", key, idempotency_ttl_s=60)
    assert push(keyed, "m1") == wire.Admission(wire.ACCEPTED)
    assert redis_client.get(key) == b"accepted"
    assert push(keyed, "m2") == wire.Admission(wire.ACCEPTED, replayed=True)
    assert redis_client.lrange("critical", 0, -1) == [b"m1"]
    assert push(Event(kind, "n2", 1, "e1", "{}"), "m3").outcome == wire.ACCEPTED  # without a key, as before


def test_eight_threads_racing_on_one_key_publish_once(redis_client, user):
    barrier = threading.Barrier(8)

    def call(n):
        barrier.wait(timeout=5)
        return notify(user, ROUTINE, entity_id="e1", payload={"n": n}, idempotency_key="race")

    with ThreadPoolExecutor(8) as pool:
        outcomes = list(pool.map(call, range(8)))
    assert outcomes == [Outcome.ACCEPTED] * 8
    assert redis_client.llen("routine") == 1
    assert replays("routine") == 7


def test_notify_on_commit_takes_the_key(redis_client, user, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        notify_on_commit(user, ROUTINE, entity_id="e1", idempotency_key="k")
    with django_capture_on_commit_callbacks(execute=True):
        notify_on_commit(user, ROUTINE, entity_id="e1", idempotency_key="k")
    assert redis_client.llen("routine") == 1
    assert replays("routine") == 1


@pytest.mark.parametrize(
    ("key", "words"),
    [
        (42, "must be a string, got int"),
        (b"k", "must be a string, got bytes"),
        ("", "must not be empty"),
        ("x" * 256, "256 characters; the limit is 255"),
        ("a\nb", "control characters"),
        ("a\x7fb", "control characters"),
        ("a\ud800", "lone surrogates"),
    ],
)
def test_a_bad_key_raises_naming_the_problem_and_publishes_nothing(redis_client, user, key, words):
    with pytest.raises(InvalidIdempotencyKey, match=words) as raised:
        notify(user, ROUTINE, entity_id="e1", idempotency_key=key)
    assert isinstance(raised.value, NotifyError)
    assert "idempotency_key" in str(raised.value)
    with pytest.raises(InvalidIdempotencyKey):
        notify_on_commit(user, ROUTINE, entity_id="e1", idempotency_key=key)
    assert redis_client.llen("routine") == 0


def test_a_key_of_255_characters_and_any_printable_text_is_fine(redis_client, user):
    assert notify(user, ROUTINE, entity_id="e1", idempotency_key="é" * 255) is Outcome.ACCEPTED
    assert notify(user, ROUTINE, entity_id="e1", idempotency_key="req 1/2:ü") is Outcome.ACCEPTED


@pytest.mark.parametrize("bad", [0, -1, "86400", 1.5, True, None])
def test_a_bad_ttl_setting_is_refused_naming_it(settings, bad):
    from django.core.exceptions import ImproperlyConfigured

    settings.SLUICE_IDEMPOTENCY_TTL_S = bad
    with pytest.raises(ImproperlyConfigured, match=r"SLUICE_IDEMPOTENCY_TTL_S must be an integer >= 1"):
        sluice_settings()


def test_the_exporter_serves_the_replays_by_class(redis_client, user):
    from pipeline.observe.exporter import SluiceCollector

    notify(user, BACKGROUND, entity_id="e1", idempotency_key="k")
    notify(user, BACKGROUND, entity_id="e1", idempotency_key="k")
    families = {family.name: family for family in SluiceCollector(120).collect()}
    served = {
        s.labels["class"]: s.value for s in families["sluice_idempotent_replays"].samples if s.name.endswith("_total")
    }
    assert served == {"critical": 0, "routine": 0, "background": 1}
