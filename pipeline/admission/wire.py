"""The wire formats between admission's Python and its Lua (admit_event.lua, admit_batch.lua, fold_handed.lua,
push_bounded.lua), each owned here.

Four formats cross the boundary, and each has one owner on each side: this module in Python, and
``pipeline/admission/lua/include/wire.lua`` in Lua. Every field goes by name, so adding one is one edit per language.

- **The request.** ``KEYS`` and ``ARGV`` are built from the name lists ``ADMIT_KEYS``/``ADMIT_ARGS`` (and
  ``FOLD_KEYS``/``FOLD_ARGS`` for the second round trip, ``PUSH_KEYS``/``PUSH_EVENT_KEYS``/``PUSH_EVENT_ARGS`` for
  waiting criticals' push, ``BATCH_KEYS``/``BATCH_EVENT_KEYS``/``BATCH_EVENT_ARGS`` for a batch); the lists
  themselves travel in the layout argument, so the Lua reads ``k.counters`` or ``a.payload``, never a position.
- **The kind's constants.** One JSON object per kind (``kind_constants``, cached: the hot path encodes
  nothing), holding the class's bound, the digest's bounds, the throttle, the counter fields' prefixes (from
  ``pipeline.metrics``), the mirror's field names, and for an inbox item's escalation its channels and its mark's
  lifetime.
- **The reply.** One JSON object, one shape (a batch's: an array of them): ``outcome`` (a name, below), ``flush``,
  ``instant``, ``reason``, ``grain``; ``message`` (the message with its channels filled in) when the
  outcome is ``full``; ``handover`` when the fold is left to the digest's own Redis; ``replayed`` when the
  caller's idempotency key was recorded already (``outcome`` is then its first call's).
- **The plan.** What a kind does for a user: ``"instant channels|digest channels|strict"``, kept as text in
  the preferences' mirror (a Redis hash written by notifications.preferences).
"""

import json
from functools import lru_cache
from typing import NamedTuple

from pipeline import activity_fields
from pipeline.metrics import fold_field, fold_grain_field, idempotent_replay_field, notifications_field

# The outcomes the reply names. The first five are an event's Outcome; the rest are what the face acts on:
# full (critical: wait for room), ceiling (the queue's hard ceiling), overflow_full and store_full (rejected).
ACCEPTED, FOLDED, COLLAPSED, DEFERRED, SUPPRESSED = "accepted", "folded", "collapsed", "deferred", "suppressed"
# The outcomes an idempotency key records (the event was taken in some form): the value of its Redis key.
RECORDED = (ACCEPTED, FOLDED, COLLAPSED, DEFERRED, SUPPRESSED)
FULL, CEILING, OVERFLOW_FULL, STORE_FULL = "full", "ceiling", "overflow_full", "store_full"

# The request's KEYS by name, in order; admit_event.lua's queue lists (the queue, then its priority
# sub-lists) follow the named ones.
ADMIT_KEYS = (
    "counters",
    "pending",
    "size",
    "overflow",
    "trigger",
    "preferences",
    "throttle",
    "fold_entity",
    "fold_kind",
    "fold_user",
    "idempotency",
    "activity",
)
# ARGV 1 is the layout and ARGV 2 the kind's constants, in both scripts; the rest by name.
ADMIT_ARGS = (
    "layout",
    "constants",
    "message",
    "payload",
    "member_entity",
    "member_kind",
    "member_user",
    "entity",
    "notification",
    "idempotency_ttl",
    "user",
    "title",
)
# admit_batch.lua: many events of one class. The batch's shared KEYS, then the queue's lists, then each event's own;
# ARGV: the layout, the counts of lists, constants, payloads and message parts, those constants, payloads and parts
# (each a JSON array: pipeline.broker.message.batch_envelope), then each event's own (its constants, payload and
# parts as indexes into those lists, from 1; its body's head and delivery tag, which the parts are joined with).
BATCH_KEYS = ("counters", "pending", "size", "overflow", "trigger", "activity")
BATCH_EVENT_KEYS = ("preferences", "throttle", "fold_entity", "fold_kind", "fold_user", "idempotency")
BATCH_EVENT_ARGS = (
    "parts",
    "body",
    "tag",
    "constants",
    "payload",
    "entity",
    "member_entity",
    "member_kind",
    "member_user",
    "notification",
    "idempotency_ttl",
    "user",
    "title",
)
#: The most events one admit_batch.lua call admits: its run time stays within a few milliseconds, so a batch never
#: holds the class's Redis longer than a few dozen admissions would.
MAX_BATCH = 200
FOLD_KEYS = ("counters", "pending", "size", "trigger", "fold_entity", "fold_kind", "fold_user")
FOLD_ARGS = ("layout", "constants", "payload", "member_entity", "member_kind", "member_user", "entity", "handed")
# push_bounded.lua: waiting criticals' retries, one or many. Its shared KEYS, the queue's lists, then each event's own
# KEYS; ARGV: the layout, the constants, the count of lists, then each event's own.
PUSH_KEYS = ("counters",)
PUSH_EVENT_KEYS = ("idempotency",)
PUSH_EVENT_ARGS = ("message", "idempotency_ttl")

ADMIT_LAYOUT = json.dumps({"keys": ADMIT_KEYS, "args": ADMIT_ARGS}).encode()
FOLD_LAYOUT = json.dumps({"keys": FOLD_KEYS, "args": FOLD_ARGS}).encode()
PUSH_LAYOUT = json.dumps({"keys": PUSH_KEYS, "event_keys": PUSH_EVENT_KEYS, "event_args": PUSH_EVENT_ARGS}).encode()
BATCH_LAYOUT = json.dumps({"keys": BATCH_KEYS, "event_keys": BATCH_EVENT_KEYS, "event_args": BATCH_EVENT_ARGS}).encode()

# Where the channels header goes in a message admission pushes (notifications.policy builds the message with
# it; only the Lua fills it in, with "null" for every channel of the kind or a JSON list of some).
CHANNELS_PLACEHOLDER = '"@SLUICE_CHANNELS@"'
# The mirror's fields: a kind's plan, the quiet intervals ("start-end,...") and the cadence ticks ("t,...").
QUIET_FIELD, CADENCE_FIELD = "q", "c"
# A size-triggered flush is in flight for at most this long (the trigger flag's TTL).
SIZE_TRIGGER_TTL_S = 5


def plan_field(kind_name):
    """The mirror's field holding a user's plan for one kind."""
    return f"k:{kind_name}"


def escalation_plan_field(kind_name):
    """The mirror's field holding what a user's choices make of a kind's escalation channels outside the kind's own
    (a plan of those channels alone; off is in neither list)."""
    return f"e:{kind_name}"


def request(names, **fields):
    """One script's KEYS or ARGV, in the order of ``names``; a missing or unknown field raises, naming it."""
    try:
        if len(fields) == len(names):
            return [fields[name] for name in names]
    except KeyError:
        pass
    unknown = sorted(set(fields) - set(names))
    missing = [name for name in names if name not in fields]
    raise TypeError(f"admission request: unknown fields {unknown}, missing fields {missing}")


@lru_cache(maxsize=64)
def kind_constants(
    kind, queue, plan, max_keys, max_fold_keys, max_fold_bytes, elsewhere=False, escalation=None, activity=0
):
    """One kind's constants as admit_event.lua and fold_handed.lua read them: a JSON object, encoded once.
    ``escalation`` is the channels of an inbox item's escalation: the user's plan for the kind is then narrowed to
    them (admit_event.lua). ``activity`` is the activity log's buffer bound (SLUICE_ACTIVITY["buffer_entries"]), 0
    while the log is off: each decision is then written nowhere."""
    escalate = escalation or ()
    klass, throttle = kind.klass, kind.throttle
    return json.dumps(
        {
            "class": klass,
            "kind": kind.name,
            "capacity": queue.capacity,
            "ceiling": queue.ceiling,
            "overflow_capacity": queue.overflow,
            "default_plan": plan,
            "mandatory": bool(kind.mandatory),
            "throttle_max": throttle.max if throttle else 0,
            "throttle_s": throttle.per_s if throttle else 0,
            "trigger_keys": max_keys,
            "trigger_ttl_s": SIZE_TRIGGER_TTL_S,
            "max_fold_keys": max_fold_keys,
            "max_fold_bytes": max_fold_bytes,
            "placeholder": CHANNELS_PLACEHOLDER,
            "channels": ",".join(kind.channels),
            "elsewhere": bool(elsewhere),
            # An inbox item's escalation: its channels ("" for any other event).
            "escalate": ",".join(escalate),
            "mirror": {
                "plan": plan_field(kind.name),
                "quiet": QUIET_FIELD,
                "cadence": CADENCE_FIELD,
                "escalation": escalation_plan_field(kind.name),
            },
            # Counter fields less their last label (an outcome, a reason, a grain: names the Lua already speaks),
            # from pipeline.metrics; whole names would triple what every call sends.
            "counter_prefix": notifications_field(klass, ""),
            "fold_prefix": fold_field(klass, ""),
            "grain_prefix": fold_grain_field(klass, ""),
            "replay_field": idempotent_replay_field(klass),
            # The outcomes an idempotency key records (include/bounded.lua record): the event was taken.
            "recorded": RECORDED,
            # The activity log (pipeline/lua/include/activity.lua): its bound and field names, or false when off.
            "activity": activity_fields.lua_constants(activity) if activity else False,
        },
        separators=(",", ":"),
    ).encode()


def decode_constants(raw):
    """kind_constants() read back, as a dict."""
    return json.loads(raw)


class Admission(NamedTuple):
    """What admission did with one event: the reply, decoded (a tuple: the hot path builds one per event)."""

    outcome: str | None  # None: nothing went out yet (a handover)
    flush: bool = False
    instant_channels: tuple = ()
    reason: str = ""
    grain: str = ""
    message: str | None = None  # the message with its channels filled in: the outcome is FULL
    handover: dict | None = None  # what to fold on the digest's own Redis (fold_handed.lua)
    replayed: bool = False  # the idempotency key was recorded: outcome is its first call's, nothing was done


#: A batch's reply for an event its user's mirror held no plan for (admit_batch.lua): the others were admitted.
ERROR = "error"


def decode_reply(raw):
    """An Admission from admit_event.lua's or fold_handed.lua's reply (JSON, one shape)."""
    return _admission(json.loads(raw))


def decode_batch_reply(raw):
    """Each event's Admission from admit_batch.lua's reply (a JSON array of admit_event.lua's replies); an event the
    batch could not admit has outcome ERROR and the script's error as its reason."""
    return [_admission(reply) for reply in json.loads(raw)]


def _admission(reply):
    if reply.get("outcome") == ERROR:
        return Admission(ERROR, reason=reply.get("error", ""))
    return Admission(
        reply.get("outcome"),
        bool(reply.get("flush")),
        tuple(filter(None, reply.get("instant", "").split(","))),
        reply.get("reason", ""),
        reply.get("grain", ""),
        reply.get("message"),
        reply.get("handover"),
        bool(reply.get("replayed")),
    )


def encode_reply(admission):
    """A reply as the Lua writes it (include/wire.lua encode_reply): for tests and tools; fields left empty are
    left out, as cjson leaves out nil."""
    fields = {
        "outcome": admission.outcome,
        "flush": int(admission.flush),
        "instant": ",".join(admission.instant_channels),
        "reason": admission.reason,
        "grain": admission.grain,
        "message": admission.message,
        "handover": admission.handover,
        "replayed": 1 if admission.replayed else None,
    }
    return json.dumps({name: value for name, value in fields.items() if value is not None}).encode()


def encode_plan(instant, digest, strict):
    """A plan as the mirror keeps it and admission reads it: "instant channels|digest channels|strict"."""
    for channel in (*instant, *digest):
        if not channel or "," in channel or "|" in channel:
            raise ValueError(f"a plan's channel names cannot be empty or hold ',' or '|': {channel!r}")
    return f"{','.join(instant)}|{','.join(digest)}|{int(bool(strict))}"


def decode_plan(text):
    """(instant channels, digest channels, strict) of an encoded plan; a malformed one raises, quoting it."""
    parts = text.split("|")
    if len(parts) != 3 or parts[2] not in ("0", "1"):
        raise ValueError(f"not a plan ('instant channels|digest channels|0 or 1'): {text!r}")
    instant, digest, strict = parts
    return tuple(filter(None, instant.split(","))), tuple(filter(None, digest.split(","))), strict == "1"
