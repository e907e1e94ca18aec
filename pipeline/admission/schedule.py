"""Scheduled sends at the broker: a class's reserved seconds, and the sends staged for its mover.

The database keeps every scheduled send (notifications.scheduling); Redis keeps two things for each class:

- **the reservations** (a class that reserves, critical: its pool's rate, SLUICE_SCHEDULE[class]): how many
  scheduled sends each second holds, at most ``slots_per_s``. A send takes the latest second of its window with room
  (reserve.lua, one atomic step that also gives up the second of the send it replaces), so a spike due at one
  second never asks its pool for more than it drains, and a send that finds no room is refused when it is
  scheduled, not sent late.
- **the staged sends**: the ids of the sends due within SLUICE_SCHEDULE["staged_s"], scored by when the mover
  publishes them (their reserved second, or their send_at), and those a mover has taken, under a lease
  (claim_due.lua, as the inbox's escalations). A staged id is only a reminder to look: the database says what it
  sends, or that it was moved or cancelled since.
"""

import time

from pipeline.admission.scripts import script
from pipeline.connections import route
from pipeline.connections import script as engine_scripts
from pipeline.redis import keys

# How far past a full window reserve.lua looks for the next second with room, for the refusal to name it.
LOOK_AHEAD_S = 86400


def reserve(klass, latest, earliest, holding, slots_per_s):
    """Reserve a second in [``earliest``, ``latest``] (Unix seconds) for each of ``len(holding)`` scheduled sends
    of ``klass``, latest first; ``holding`` gives the second each holds now and gives up once it has its new one
    (None for a new send). Return (the seconds reserved, for the first sends in order; the earliest second at or
    after ``earliest`` with room, or None, when some found none)."""
    reply = script("reserve", on=route(klass).client)(
        keys=[keys.scheduled_slots(klass), keys.scheduled_seconds(klass)],
        args=[slots_per_s, int(latest), int(earliest), len(holding), LOOK_AHEAD_S, *(s or "" for s in holding)],
    )
    nxt, seconds = int(reply[0]), [int(s) for s in reply[1:]]
    return seconds, (None if nxt <= 0 else nxt)


def release(klass, seconds):
    """Give up reserved ``seconds`` (one send each: cancelled, or gone) in one step."""
    if seconds:
        script("reserve", on=route(klass).client)(
            keys=[keys.scheduled_slots(klass), keys.scheduled_seconds(klass)],
            args=[1, 0, 0, 0, 0, *(int(s) for s in seconds)],
        )


def prune(klass, before, limit=1000):
    """Forget up to ``limit`` reserved seconds before ``before`` (Unix seconds): gone by, they hold nothing."""
    client = route(klass).client
    gone = client.zrangebyscore(keys.scheduled_seconds(klass), "-inf", before, start=0, num=limit)
    if gone:
        client.pipeline(transaction=True).hdel(keys.scheduled_slots(klass), *gone).zrem(
            keys.scheduled_seconds(klass), *gone
        ).execute()


def stage(klass, due):
    """Stage sends for the mover: {row id: when due (Unix seconds)}; a staged one takes its new time."""
    if due:
        route(klass).client.zadd(keys.scheduled_due(klass), {str(k): v for k, v in due.items()})


def unstage(klass, ids):
    """Forget staged sends (cancelled): a stale one would only make the mover look once, and find nothing."""
    if ids:
        route(klass).client.zrem(keys.scheduled_due(klass), *[str(i) for i in ids])


def claim_due(klass, lease_s, limit, now=None):
    """Take up to ``limit`` of ``klass``'s staged sends that are due, for one mover step, under a lease; those whose
    mover's lease ran out first. Return their row ids."""
    taken = engine_scripts("claim_due", on=route(klass).client)(
        keys=[keys.scheduled_due(klass), keys.scheduled_claimed(klass)],
        args=[time.time() if now is None else now, lease_s, limit],
    )
    return [int(i) for i in taken]


def finish(klass, ids):
    """Drop the claims of sends a mover finished (published, gone, or staged again)."""
    if ids:
        route(klass).client.zrem(keys.scheduled_claimed(klass), *[str(i) for i in ids])


def next_due(klass):
    """When ``klass``'s next staged send is due (Unix seconds), or None: the mover sleeps until then."""
    found = route(klass).client.zrange(keys.scheduled_due(klass), 0, 0, withscores=True)
    return found[0][1] if found else None


def staged_until(klass):
    """Until when the database's sends are staged (Unix seconds); None after Redis lost its data (or before the
    first staging), when everything must be staged again and the reservations rebuilt."""
    found = route(klass).client.get(keys.scheduled_staged(klass))
    return float(found) if found is not None else None


def mark_staged(klass, until):
    route(klass).client.set(keys.scheduled_staged(klass), until)


def rebuild(klass, counts):
    """Put back ``klass``'s reservations from the database's counts ({second: sends}), after Redis lost them."""
    client = route(klass).client
    pipe = client.pipeline(transaction=True)
    pipe.delete(keys.scheduled_slots(klass), keys.scheduled_seconds(klass))
    if counts:
        pipe.hset(keys.scheduled_slots(klass), mapping={int(s): n for s, n in counts.items()})
        pipe.zadd(keys.scheduled_seconds(klass), {int(s): int(s) for s in counts})
    pipe.execute()


def reserved_within(klass, seconds, now=None):
    """How many sends ``klass`` has reserved in the next ``seconds`` (the exporter's sluice_scheduled_due)."""
    now = time.time() if now is None else now
    client = route(klass).client
    found = client.zrangebyscore(keys.scheduled_seconds(klass), int(now), int(now + seconds))
    if not found:
        return 0
    return sum(int(n or 0) for n in client.hmget(keys.scheduled_slots(klass), found))


def staged_within(klass, seconds, now=None):
    """How many of ``klass``'s staged sends are due in the next ``seconds``."""
    now = time.time() if now is None else now
    return route(klass).client.zcount(keys.scheduled_due(klass), now, now + seconds)
