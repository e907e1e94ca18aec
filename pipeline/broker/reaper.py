"""The reliable fetch's reaper: every dead consumer that holds messages gives them back in one scan, in bounded steps.

A consumer (a worker's fetch channel, or a batch consumer while its batch holds messages) is registered in a set on
its broker's Redis and keeps a heartbeat key with a TTL of ``fetch_dead_after_s``. A scan, at most one at a time
across every worker (a lock), runs every quarter of ``fetch_dead_after_s`` in each live worker:

1. it walks the whole registry with SSCAN, a chunk a round trip, and notes the dead consumers and what each holds;
2. it reaps those holding messages first, the most first, then forgets the empty ones;
3. each reap step is one Lua call that moves at most ``STEP`` messages back, so no call runs unbounded: a
   consumer holding more takes several steps, and other clients' commands run between them; a scan past its
   allowance (``SCAN_ALLOWANCE_S``) reaps no further consumer and leaves them to the next scan.

So a dead consumer's messages are back in their queue within ``bound_s()``: its heartbeat expires at most
``fetch_dead_after_s`` after the kill, the next scan starts within a quarter of it, and the scan itself takes
well under ``SCAN_ALLOWANCE_S`` (docs/reliability.md gives the measured figures). Every key name comes from
pipeline.redis.keys; the Lua script is given each one.
"""

import time
from dataclasses import dataclass, field

from pipeline.connections import lua_source
from pipeline.connections import script as engine_scripts
from pipeline.redis import keys

#: The most messages (and delivery tags) one reap step moves: a Lua call stays short however much a consumer held.
STEP = 500
#: Consumers whose heartbeat one round trip checks while the registry is walked.
CHUNK = 200
#: What the bound allows for one scan's own time. Measured far below it with 20 pods killed at once
#: (docs/reliability.md); it is part of the "sent" marks' lifetime (pipeline.broker.marks).
SCAN_ALLOWANCE_S = 2.0
#: The lock is a little shorter than the interval between a worker's scans, so a timer that fires a few
#: milliseconds early never finds its own last lock still there and skips a turn.
LOCK_SHARE = 0.9


def interval_s(dead_after_s):
    """How often each worker scans: a quarter of the time after which a silent consumer is dead."""
    return dead_after_s / 4


def bound_s(dead_after_s):
    """The most a dead consumer's messages take to be back in their queue after the kill: its heartbeat expires
    (``dead_after_s``), the next scan starts (one interval), and the scan runs (its allowance)."""
    return dead_after_s + interval_s(dead_after_s) + SCAN_ALLOWANCE_S


@dataclass
class Dead:
    """A consumer found dead, the source lists it registered, and how many messages it holds."""

    consumer: str
    sources: list = field(default_factory=list)
    held: int = 0
    moved: int = 0
    tags: list = field(default_factory=list)


def _script(client):
    # register_script only hashes the (cached) text; EVALSHA falls back to EVAL after a Redis restart.
    return client.register_script(lua_source(engine_scripts.path("fetch_reap")))


def scan(client, dead_after_s, restore_tag, key_tag=""):
    """One scan of ``client``'s registry, if no other worker's runs: every dead consumer holding messages gives them
    back (``restore_tag(tag)`` for each delivery tag it held in kombu's unacked record), then the empty ones are
    forgotten. Returns the reaped consumers, those that held messages first; [] when another scan holds the lock.
    ``key_tag``: the registry of one cluster partition (pipeline.redis.cluster), whose fetch keys all start with it."""
    lock_ms = max(1, int(interval_s(dead_after_s) * 1000 * LOCK_SHARE))
    if not client.set(keys.fetch_reaper_lock(key_tag), 1, nx=True, px=lock_ms):
        return []
    # A scan runs in a worker's own loop, between its fetches: past its allowance it leaves the rest for the next
    # scan (a quarter of dead_after_s later), as every housekeeping step does (pipeline.housekeeping).
    deadline = time.monotonic() + SCAN_ALLOWANCE_S
    found = dead_consumers(client, key_tag)
    # Those that hold messages first, the most first: an empty one costs nothing but its removal.
    found.sort(key=lambda dead: -dead.held)
    reaped = []
    for dead in found:
        if time.monotonic() > deadline:
            break
        if reap(client, dead, restore_tag, key_tag=key_tag):
            reaped.append(dead)
    return reaped


def release(client, consumer, sources, restore_tag, key_tag=""):
    """Give back at once what ``consumer`` (alive or not) holds, and forget it: a clean stop, or a batch ended."""
    return reap(client, Dead(consumer, list(sources)), restore_tag, force=True, key_tag=key_tag)


def dead_consumers(client, key_tag=""):
    """Every registered consumer whose heartbeat is gone, with its sources and what it holds: a few round trips a
    chunk of the registry."""
    registry = keys.fetch_consumers(key_tag)
    found, chunk = [], []
    for member in client.sscan_iter(registry, count=CHUNK):
        chunk.append(member.decode() if isinstance(member, bytes) else member)
        if len(chunk) >= CHUNK:
            found.extend(_dead_in(client, chunk, key_tag))
            chunk = []
    if chunk:
        found.extend(_dead_in(client, chunk, key_tag))
    return found


def _dead_in(client, consumers, key_tag):
    pipe = client.pipeline(transaction=False)
    for consumer in consumers:
        pipe.exists(keys.fetch_alive(consumer, key_tag))
    dead = [Dead(consumer) for consumer, alive in zip(consumers, pipe.execute(), strict=True) if not alive]
    if not dead:
        return []
    pipe = client.pipeline(transaction=False)
    for one in dead:
        pipe.smembers(keys.fetch_sources(one.consumer, key_tag)).scard(keys.fetch_tags(one.consumer, key_tag))
    replies = pipe.execute()
    pipe = client.pipeline(transaction=False)
    for index, one in enumerate(dead):
        one.sources = sorted(s.decode() if isinstance(s, bytes) else s for s in replies[2 * index])
        one.held = replies[2 * index + 1]
        for source in one.sources:
            pipe.llen(keys.fetch_processing(one.consumer, source, key_tag))
    lengths = iter(pipe.execute())
    for one in dead:
        one.held += sum(next(lengths) for _source in one.sources)
    return dead


def reap(client, dead, restore_tag, force=False, key_tag=""):
    """Move back what ``dead`` holds, STEP messages a call, and forget it. False if it turned out to be alive (its
    heartbeat came back: it was only stalled) unless ``force``. Its sources are read again when they changed."""
    script = _script(client)
    while True:
        sources = dead.sources
        reply = script(
            keys=[
                keys.fetch_consumers(key_tag),
                keys.fetch_alive(dead.consumer, key_tag),
                keys.fetch_sources(dead.consumer, key_tag),
                keys.fetch_tags(dead.consumer, key_tag),
                *sources,
                *(keys.fetch_processing(dead.consumer, source, key_tag) for source in sources),
            ],
            args=[dead.consumer, STEP, 1 if force else 0],
        )
        status, moved, tags = reply[0], int(reply[1]), reply[2]
        status = status.decode() if isinstance(status, bytes) else status
        dead.moved += moved
        for tag in tags:
            tag = tag.decode() if isinstance(tag, bytes) else tag
            dead.tags.append(tag)
            restore_tag(tag)
        if status == "alive":
            return False
        if status == "done":
            return True
        if status == "changed":
            # It registered another source since it was read (a stalled consumer fetched again): read them again.
            found = client.smembers(keys.fetch_sources(dead.consumer, key_tag))
            dead.sources = sorted(s.decode() if isinstance(s, bytes) else s for s in found)
