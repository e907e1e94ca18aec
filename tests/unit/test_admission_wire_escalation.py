"""An inbox item's escalation through admission's wire: its constants by name, the user's plan narrowed to its
channels, and its idempotency key, recorded in the step that admits it, making a second admission a replay."""

import json

import pytest

from notifications.inbox import escalation
from pipeline.admission import wire
from pipeline.admission.event import Event
from pipeline.admission.runner import admit
from pipeline.conf import sluice_settings
from pipeline.redis import keys
from tests.unit.test_admission_wire import WIRE_LUA

KIND = {"class": "routine", "channels": ["inbox", "email"], "escalate": {"after_s": 900, "channels": ["email"]}}
INBOX = "notifications.inbox.channel.InboxChannel"
LOCMEM = "notifications.channels.locmem.LocmemChannel"


@pytest.fixture
def kind(settings):
    settings.SLUICE_CHANNELS = {"email": {"backend": LOCMEM}, "inbox": {"backend": INBOX}}
    settings.SLUICE_KINDS = {"doc.reviewed": KIND, "doc.changed": {**KIND, "channels": ["inbox"]}}
    return sluice_settings().kinds["doc.reviewed"]


def once_key(item_id):
    return keys.idempotency(escalation.SCOPE, str(item_id))


def escalate(kind, item_id=1, user_id=7):
    event = Event(
        kind,
        f"esc-{item_id}",
        user_id,
        f"r{item_id}",
        '{"title":"R"}',
        once_key(item_id),
        escalation=tuple(kind.escalate[1]),
        idempotency_ttl_s=60,
    )
    return admit(event)


def test_an_escalations_constants_come_back_by_name(redis_client, kind):
    conf = sluice_settings()
    args = [getattr(conf.digest, name) for name in ("max_keys", "max_fold_keys", "max_fold_bytes")]
    raw = wire.kind_constants(kind, conf.queues["routine"], "x||0", *args, False, ("email", "sms"))
    plain = wire.kind_constants(kind, conf.queues["routine"], "x||0", *args, False)
    body = "local c = read_request(KEYS, ARGV)\nreturn cjson.encode(c)"
    argv = [wire.ADMIT_LAYOUT, raw, *[""] * (len(wire.ADMIT_ARGS) - 2)]
    back = json.loads(redis_client.eval(f"{WIRE_LUA}\n{body}", 0, *argv))
    assert back["escalate"] == "email,sms"
    assert wire.decode_constants(plain)["escalate"] == ""


def mirror(redis_client, kind, plan, user_id=7):
    redis_client.hset(keys.preferences(user_id), wire.plan_field(kind.name), plan)


def test_email_as_a_digest_folds_the_escalation_once(redis_client, kind):
    mirror(redis_client, kind, wire.encode_plan(("inbox",), ("email",), False))
    done = escalate(kind)
    assert (done.outcome, done.reason) == (wire.FOLDED, "preference")
    fold = redis_client.hgetall(keys.fold(keys.fold_member(7, "doc.reviewed", "r1")))
    assert (fold[b"n"], fold.get(b"c:email"), fold.get(b"c:inbox")) == (b"1", b"1", None)
    assert 0 < redis_client.ttl(once_key(1)) <= 60
    again = escalate(kind)  # a takeover: the first outcome replayed, nothing folded again
    assert (again.outcome, again.replayed) == (wire.FOLDED, True)
    assert redis_client.hget(keys.fold(keys.fold_member(7, "doc.reviewed", "r1")), "n") == b"1"


def test_email_instant_sends_the_escalation_on_email_only(redis_client, kind):
    mirror(redis_client, kind, wire.encode_plan(("inbox", "email"), (), True))
    done = escalate(kind)
    assert (done.outcome, done.instant_channels) == (wire.ACCEPTED, ("email",))
    [raw] = redis_client.lrange("routine", 0, -1)
    assert json.loads(raw)["headers"]["sluice_channels"] == ["email"]


def test_email_off_cancels_the_escalation(redis_client, kind):
    mirror(redis_client, kind, wire.encode_plan(("inbox",), (), True))
    assert escalate(kind).outcome == wire.SUPPRESSED
    assert redis_client.llen("routine") == 0


def test_no_room_admits_nothing_and_marks_nothing(redis_client, kind, settings):
    # A strict user's routine event waits in the overflow when the queue is full; with the overflow full too, it is
    # refused: the escalation waits for the next drain, unmarked.
    settings.SLUICE_QUEUES = {"routine": {"capacity": 1, "overflow": 1}}
    mirror(redis_client, kind, wire.encode_plan(("inbox", "email"), (), True))
    redis_client.lpush("routine", "x")
    redis_client.rpush(keys.overflow("routine"), "y")
    assert escalate(kind).outcome == wire.OVERFLOW_FULL
    assert not redis_client.exists(once_key(1))  # refused: a later drain decides it afresh


@pytest.mark.parametrize(
    ("plan", "outcome"),
    [(wire.encode_plan((), ("inbox",), False), wire.FOLDED), (wire.encode_plan(("inbox",), (), False), wire.ACCEPTED)],
)
def test_a_channel_outside_the_kind_goes_as_the_kind_goes_for_the_user(redis_client, kind, plan, outcome):
    changed = sluice_settings().kinds["doc.changed"]
    mirror(redis_client, changed, plan)
    assert escalate(changed).outcome == outcome
