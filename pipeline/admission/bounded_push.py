"""The bounded push of critical events that wait for room (push_bounded.lua): the same bound as their admission, in
one atomic step at the broker; and refusals counted, each burst logged once.

What a class does when its queue is full (wait, fold, collapse) is decided in admission's one step; a critical
event that found its queue full comes back here while its caller waits (notifications.policy).
"""

from redis.exceptions import RedisError

from pipeline import activity_fields, durability
from pipeline.admission import wire
from pipeline.admission.event import key_ttl
from pipeline.admission.runner import request_constants
from pipeline.admission.scripts import script
from pipeline.conf import sluice_settings
from pipeline.connections import route
from pipeline.metrics import notifications_field
from pipeline.redis import keys


def push(event, message):
    """Push ``message`` (its channels filled in: admit_event.lua's full reply) if the event's queue has room; return
    its Admission: ACCEPTED, FULL or CEILING; or, when the event's idempotency key was recorded already (a concurrent
    call with the same key got in first), its outcome with ``replayed``, nothing pushed. NotReplicated when a
    replicated class's replicas do not confirm the push in time (pipeline.durability)."""
    return push_many([(event, message)])[0]


def push_many(waiting):
    """push() for many waiting events of one class, [(event, message)], in one round trip and in order: the first
    that fit are pushed, and once one does not fit none after it is. Return their Admissions in order."""
    event = waiting[0][0]
    found = route(event.kind.klass, event.user_id)
    event_keys, event_args = [], []
    for each, message in waiting:
        idempotency = each.idempotency
        event_keys.append(idempotency or keys.NO_IDEMPOTENCY)
        event_args += (message, key_ttl(each) if idempotency else 0)
    reply = durability.run(
        script.get("push_bounded"),
        keys=[keys.counters(), *found.lists, *event_keys],
        args=[wire.PUSH_LAYOUT, request_constants(event, found), len(found.lists), *event_args],
        client=found.client,
        queue=found.queue,
        klass=found.klass,
        step="admission",
    )
    return wire.decode_batch_reply(reply)


def opens_burst(klass, what, burst_window_s):
    """True for the first refusal of ``what`` in a burst (none in the last ``burst_window_s`` seconds), so the caller
    logs a burst once; the refusals themselves are counted where they happen."""
    return bool(route(klass).client.set(keys.refused_burst(klass, what), 1, nx=True, ex=burst_window_s))


def count_rejection(klass, burst_window_s, user_id=None):
    """Count a refused event (in ``user_id``'s partition of a class on a Redis Cluster); return True when it opens a
    burst of refusals (so the caller logs it once)."""
    return bool(
        script("reject", on=route(klass, user_id).client)(
            keys=[keys.counters(), keys.rejected_burst(klass)],
            args=[notifications_field(klass, "rejected"), burst_window_s],
        )
    )


def log_waited(events, outcome, detail=""):
    """Write to the activity log what a wait for room came to for ``events`` (one class): ``outcome`` ACCEPTED (pushed
    after a wait) or REJECTED (``detail``: the retry_after told to the caller). Admission wrote nothing for them (a
    full queue's answer is not a decision yet), so this is their entry: one pipelined round trip for them all, on the
    waiting path only. Never raises."""
    conf = sluice_settings().activity
    if not events or not conf.enabled:
        return
    reason = "waited" if outcome == activity_fields.ACCEPTED else "full"
    try:
        pipe = route(events[0].kind.klass, events[0].user_id).client.pipeline(transaction=False)
        for event in events:
            entry = activity_fields.Entry(
                str(event.user_id),
                event.kind.name,
                event.entity_id,
                event.notification_id,
                event.kind.klass,
                outcome,
                reason,
                detail,
                title=event.title,
            )
            activity_fields.add(pipe, entry, conf.buffer_entries)
        pipe.execute()
    except RedisError as exc:
        # The answer stands (the caller was told); only its line in the log is missing.
        activity_fields.logger.warning("activity: %d waited entries not recorded: %s", len(events), type(exc).__name__)
