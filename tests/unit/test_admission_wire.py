"""Admission's wire formats go Python → Lua → Python unchanged through a real Redis, every field by name."""

import dataclasses
import json
import re
import uuid
from pathlib import Path

import pytest

from pipeline.admission import wire
from pipeline.admission.event import Event, default_plan
from pipeline.admission.runner import admit
from pipeline.broker.message import CHANNELS_HEADER
from pipeline.conf import sluice_settings
from pipeline.conf.kinds import Throttle
from pipeline.metrics import fold_field, fold_grain_field, notifications_field

LUA = Path(wire.__file__).with_name("lua")
WIRE_LUA = (LUA / "include" / "wire.lua").read_text()


def run(client, body, keys=(), args=()):
    """``body`` run on Redis after include/wire.lua, as the admission scripts run it."""
    return client.eval(f"{WIRE_LUA}\n{body}", len(keys), *keys, *args)


def constants(kind_name="task.comment", elsewhere=False, **kind_changes):
    conf = sluice_settings()
    kind = dataclasses.replace(conf.kinds[kind_name], **kind_changes)
    digest = conf.digest
    return wire.kind_constants(
        kind,
        conf.queues[kind.klass],
        default_plan(kind),
        digest.max_keys,
        digest.max_fold_keys,
        digest.max_fold_bytes,
        elsewhere,
    )


def named(names, **given):
    return wire.request(names, **{name: given.get(name, f"<{name}>") for name in names})


@pytest.mark.parametrize("elsewhere", [False, True])
@pytest.mark.parametrize("kind_name", ["meeting.reminder", "task.comment", "board.updated"])
def test_the_kinds_constants_come_back_as_they_went(redis_client, kind_name, elsewhere):
    raw = constants(kind_name, elsewhere)
    args = named(wire.ADMIT_ARGS, layout=wire.ADMIT_LAYOUT, constants=raw)
    back = run(redis_client, "local c = read_request(KEYS, ARGV)\nreturn cjson.encode(c)", args=args)
    assert wire.decode_constants(back) == wire.decode_constants(raw)
    assert wire.decode_constants(back)["elsewhere"] is elsewhere


def test_a_throttled_kinds_constants_carry_its_throttle(redis_client):
    raw = constants(throttle=Throttle(max=3, per_s=60))
    args = named(wire.ADMIT_ARGS, layout=wire.ADMIT_LAYOUT, constants=raw)
    back = wire.decode_constants(run(redis_client, "return cjson.encode((read_request(KEYS, ARGV)))", args=args))
    assert (back["throttle_max"], back["throttle_s"]) == (3, 60)
    assert back["counter_prefix"] + "accepted" == notifications_field("routine", "accepted")
    assert back["fold_prefix"] + "quiet" == fold_field("routine", "quiet")
    assert back["grain_prefix"] + "user" == fold_grain_field("routine", "user")


@pytest.mark.parametrize(
    ("layout", "key_names", "arg_names"),
    [(wire.ADMIT_LAYOUT, wire.ADMIT_KEYS, wire.ADMIT_ARGS), (wire.FOLD_LAYOUT, wire.FOLD_KEYS, wire.FOLD_ARGS)],
)
def test_the_request_reaches_the_lua_by_name(redis_client, layout, key_names, arg_names):
    request_keys = named(key_names)
    args = named(arg_names, layout=layout, constants=constants())
    body = "local _, k, a, first = read_request(KEYS, ARGV)\nreturn cjson.encode({k = k, a = a, first = first})"
    back = json.loads(run(redis_client, body, keys=[*request_keys, "queue", "queue\x06\x163"], args=args))
    assert back["k"] == {name: f"<{name}>" for name in key_names}
    sent = [value.decode() if isinstance(value, bytes) else value for value in args]
    assert back["a"] == dict(zip(arg_names, sent, strict=True))
    # The keys after the named ones are the queue's lists: the depth starts there.
    assert back["first"] == len(key_names) + 1


def test_a_request_missing_or_adding_a_field_is_refused_by_name():
    fields = {name: "x" for name in wire.ADMIT_ARGS if name != "payload"}
    with pytest.raises(TypeError, match=r"missing fields \['payload'\]"):
        wire.request(wire.ADMIT_ARGS, **fields)
    with pytest.raises(TypeError, match=r"unknown fields \['paylaod'\]"):
        wire.request(wire.ADMIT_ARGS, **fields, paylaod="x")


REPLIES = [
    wire.Admission(wire.ACCEPTED, flush=True, instant_channels=("email", "push")),
    wire.Admission(wire.FOLDED, instant_channels=("email",), reason="quiet", grain="kind"),
    wire.Admission(wire.SUPPRESSED, reason="off"),
    wire.Admission(wire.FULL, instant_channels=("push",), message='{"headers":{"sluice_channels":["push"]}}'),
    wire.Admission(wire.STORE_FULL, reason="preference"),
    # The idempotency key was recorded: the first call's outcome, replayed.
    wire.Admission(wire.FOLDED, replayed=True),
    # A handover: nothing went out yet; the fold is left to the digest's own Redis.
    wire.Admission(
        None,
        instant_channels=("email",),
        handover={"hold": "overflow", "due": 1796156714.5, "digest": "push", "digest_due": 0},
    ),
]


@pytest.mark.parametrize("reply", REPLIES, ids=lambda reply: str(reply.outcome))
def test_a_reply_comes_back_as_it_went(redis_client, reply):
    back = run(redis_client, "return encode_reply(cjson.decode(ARGV[1]))", args=[wire.encode_reply(reply)])
    assert wire.decode_reply(back) == reply


PLANS = [(("email", "push"), (), False), ((), ("email",), False), (("sms",), ("email", "push"), True), ((), (), True)]


@pytest.mark.parametrize("plan", PLANS, ids=str)
def test_a_plan_comes_back_as_it_went(redis_client, plan):
    body = "local instant, digest, strict = decode_plan(ARGV[1])\nreturn encode_plan(instant, digest, strict)"
    back = run(redis_client, body, args=[wire.encode_plan(*plan)])
    assert wire.decode_plan(back.decode()) == plan


@pytest.mark.parametrize("bad", ["email||", "email|push", "email||2", "a|b|c|1"])
def test_a_malformed_plan_is_refused_on_both_sides(redis_client, bad):
    with pytest.raises(ValueError, match="not a plan"):
        wire.decode_plan(bad)
    assert run(redis_client, "return decode_plan(ARGV[1]) == nil", args=[bad]) == 1


def test_a_plan_cannot_hold_its_own_separators():
    with pytest.raises(ValueError, match=r"'e,mail'"):
        wire.encode_plan(("e,mail",), (), False)


def lua_names(text, table):
    """The fields ``table``.<field> that Lua ``text`` reads, comments left out."""
    code = "\n".join(line.split("--", 1)[0] for line in text.splitlines())
    return set(re.findall(rf"\b{table}\.(\w+)", code))


def test_every_name_the_lua_reads_is_one_python_sends():
    admit, handed = (LUA / "admit_event.lua").read_text(), (LUA / "fold_handed.lua").read_text()
    fold = (LUA / "include" / "fold.lua").read_text()
    sent = set(wire.decode_constants(constants()))
    assert lua_names(admit, "k") <= set(wire.ADMIT_KEYS)
    assert lua_names(admit, "a") <= set(wire.ADMIT_ARGS)
    assert lua_names(handed, "a") <= set(wire.FOLD_ARGS)
    assert lua_names(fold, "k") <= set(wire.ADMIT_KEYS) & set(wire.FOLD_KEYS)
    assert lua_names(fold, "a") <= set(wire.ADMIT_ARGS) & set(wire.FOLD_ARGS)
    for text in (admit, handed, fold):
        assert lua_names(text, "c") <= sent
    assert lua_names(handed, "h") <= {"hold", "due", "digest", "digest_due"}


def test_a_full_critical_queue_replies_with_the_message_its_channels_filled_in(redis_client, settings):
    conf = sluice_settings()
    kind = conf.kinds["meeting.reminder"]
    full = dataclasses.replace(conf.queues["critical"], capacity=0)
    event = Event(kind, uuid.uuid4().hex, 7, "m1", "{}")
    done = admit(event, full)
    assert (done.outcome, done.instant_channels) == (wire.FULL, ("push", "email"))
    # Every channel of the kind: the header says null, and nothing of the placeholder is left.
    assert json.loads(done.message)["headers"][CHANNELS_HEADER] is None
    assert redis_client.llen(full.name) == 0
