"""An inbox item's escalation through admission's wire: its constants by name, the user's plan narrowed to its
channels, and its mark, set in the step that admits it, making a second admission a duplicate."""

import json

import pytest

from digest import admission_wire as wire
from digest.admission import admit_event
from notifications.policy import Event, default_plan, event_message
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


def escalate(kind, item_id=1, user_id=7):
    conf = sluice_settings()
    queue = conf.queues[kind.klass]
    event = Event(kind, f"esc-{item_id}", user_id, f"r{item_id}", '{"title":"R"}')
    message = event_message(event, queue.name, wire.CHANNELS_PLACEHOLDER)
    once = wire.Escalation(kind.escalate[1], keys.inbox_escalated(item_id), 60)
    return admit_event(event, queue, message, default_plan(kind), conf.digest, event.notification_id, escalation=once)


def test_an_escalations_constants_come_back_by_name(redis_client, kind):
    conf = sluice_settings()
    args = [conf.digest[name] for name in ("max_keys", "max_fold_keys", "max_fold_bytes")]
    raw = wire.kind_constants(kind, conf.queues["routine"], "x||0", *args, False, (("email", "sms"), 60))
    plain = wire.kind_constants(kind, conf.queues["routine"], "x||0", *args, False)
    body = "local c = read_request(KEYS, ARGV)\nreturn cjson.encode(c)"
    argv = [wire.ADMIT_LAYOUT, raw, *[""] * (len(wire.ADMIT_ARGS) - 2)]
    back = json.loads(redis_client.eval(f"{WIRE_LUA}\n{body}", 0, *argv))
    assert (back["escalate"], back["mark_ttl_s"]) == ("email,sms", 60)
    assert (wire.decode_constants(plain)["escalate"], wire.decode_constants(plain)["mark_ttl_s"]) == ("", 0)


def test_a_duplicate_reply_comes_back_as_it_went(redis_client):
    reply = wire.Admission(wire.DUPLICATE)
    back = redis_client.eval(f"{WIRE_LUA}\nreturn encode_reply(cjson.decode(ARGV[1]))", 0, wire.encode_reply(reply))
    assert wire.decode_reply(back) == reply


def mirror(redis_client, kind, plan, user_id=7):
    redis_client.hset(keys.preferences(user_id), wire.plan_field(kind.name), plan)


def test_email_as_a_digest_folds_the_escalation_once(redis_client, kind):
    mirror(redis_client, kind, wire.encode_plan(("inbox",), ("email",), False))
    done = escalate(kind)
    assert (done.outcome, done.reason) == (wire.FOLDED, "preference")
    fold = redis_client.hgetall(keys.fold(keys.fold_member(7, "doc.reviewed", "r1")))
    assert (fold[b"n"], fold.get(b"c:email"), fold.get(b"c:inbox")) == (b"1", b"1", None)
    assert 0 < redis_client.ttl(keys.inbox_escalated(1)) <= 60
    assert escalate(kind).outcome == wire.DUPLICATE  # a takeover: nothing folded again
    assert redis_client.hget(keys.fold(keys.fold_member(7, "doc.reviewed", "r1")), "n") == b"1"


def test_email_instant_sends_the_escalation_on_email_only(redis_client, kind):
    mirror(redis_client, kind, wire.encode_plan(("inbox", "email"), (), True))
    done = escalate(kind)
    assert (done.outcome, done.instant_channels) == (wire.ACCEPTED, ("email",))
    [raw] = redis_client.lrange("routine", 0, -1)
    assert json.loads(raw)["headers"]["sluice_channels"] == ["email"]


def test_email_off_cancels_the_escalation_and_marks_nothing(redis_client, kind):
    mirror(redis_client, kind, wire.encode_plan(("inbox",), (), True))
    assert escalate(kind).outcome == wire.SUPPRESSED
    assert not redis_client.exists(keys.inbox_escalated(1))


def test_no_room_admits_nothing_and_marks_nothing(redis_client, kind, settings):
    # A strict user's routine event waits in the overflow when the queue is full; with the overflow full too, it is
    # refused: the escalation waits for the next drain, unmarked.
    settings.SLUICE_QUEUES = {"routine": {"capacity": 1, "overflow": 1}}
    mirror(redis_client, kind, wire.encode_plan(("inbox", "email"), (), True))
    redis_client.lpush("routine", "x")
    redis_client.rpush(keys.overflow("routine"), "y")
    assert escalate(kind).outcome == wire.OVERFLOW_FULL
    assert not redis_client.exists(keys.inbox_escalated(1))


@pytest.mark.parametrize(
    ("plan", "outcome"),
    [(wire.encode_plan((), ("inbox",), False), wire.FOLDED), (wire.encode_plan(("inbox",), (), False), wire.ACCEPTED)],
)
def test_a_channel_outside_the_kind_goes_as_the_kind_goes_for_the_user(redis_client, kind, plan, outcome):
    changed = sluice_settings().kinds["doc.changed"]
    mirror(redis_client, changed, plan)
    assert escalate(changed).outcome == outcome
