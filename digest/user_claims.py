"""The Lua wire of one digest per user: claim whole users' folds, publish a user group's messages, hand them over."""

import json
import time

from digest.fold_store import HANDOVER_TTL_S, script
from pipeline import durability
from pipeline.conf import queue_lists, sluice_settings
from pipeline.redis import keys

# The most due keys staged at once for claiming user by user (claim_users.lua): one step's work stays bounded. A
# user whose keys fall both inside and past a stage of this many (only with more due keys than it) gets two digests.
STAGE_LIMIT = 10_000
# The most users one claim looks at: past users whose classes have no room, the walk stops and says so.
LOOK_LIMIT = 1_000


class Claimed(list):
    """The members one claim took; ``left`` says whether due keys were left staged for want of room."""

    def __init__(self, members, left):
        super().__init__(members)
        self.left = left


def encode_rooms(rooms, conf):
    """claim_users.lua's rooms argument: each class's room in the store's order (``rooms``, the first being the
    class of a kind it does not know), and the class of every kind of those classes (digest.grouping.class_of)."""
    kinds = {name: kind.klass for name, kind in conf.kinds.items() if kind.klass in rooms}
    return json.dumps({"rooms": [[klass, int(room)] for klass, room in rooms.items()], "kinds": kinds})


def claim_users(flush_id, max_users, max_keys, lease_s, client, rooms=None):
    """Claim the due folds of up to ``max_users`` whole users (and about ``max_keys`` keys) for ``flush_id``, taking
    each class's keys only up to its room (``rooms``: {class: keys}, in the store's order; by default routine and
    background, each up to ``max_keys``); return the Claimed."""
    rooms = rooms if rooms is not None else {"routine": max_keys, "background": max_keys}
    claimed, left = script("claim_users", on=client)(
        keys=[keys.pending(), keys.digest_staged(), keys.claims(), keys.claim_set(flush_id)],
        args=[
            keys.fold(""),
            flush_id,
            time.time() + lease_s,
            max_users,
            max_keys,
            STAGE_LIMIT,
            keys.claimed(flush_id, ""),
            LOOK_LIMIT,
            encode_rooms(rooms, sluice_settings()),
        ],
    )
    return Claimed([m.decode() for m in claimed], bool(left))


def _claimed_prefix(flush_id):
    # keys.claimed(flush_id, member) is this prefix and the member.
    return keys.claimed(flush_id, "")


def publish_group(flush_id, step, queue, messages, counters, client):
    """Push a step's ``messages`` (grouping.Step) and release every fold it covers in one step; 1 sent, 0 queue full,
    -1 done already. ``counters`` is (published field, digest messages field, digest events field, events)."""
    return script("publish_group", on=client)(
        keys=[keys.claim_set(flush_id), keys.counters(), keys.fold_store_size(), *queue_lists(queue.name)],
        args=[_claimed_prefix(flush_id), queue.capacity, len(step.members), *step.members, *counters, *messages],
    )


def publish_group_elsewhere(flush_id, step, queue, messages, counters, client, queue_client, klass):
    """publish_group() for a fold store on another Redis than ``queue``'s (on ``queue_client``): the messages go out
    with the step's handover mark in one step there, then its claims are dropped here. Whoever takes over a flusher
    that died in between finds the mark and only drops the claims. Same codes. A replicated ``klass`` drops the
    claims only once its replicas confirmed the messages (NotReplicated otherwise: the claims stay, and the takeover
    finds the mark or publishes again)."""
    code = durability.run(
        script.get("push_group_handover"),
        keys=[keys.handover(flush_id), keys.counters(), *queue_lists(queue.name)],
        args=[queue.capacity, step.mark, HANDOVER_TTL_S, *counters, len(step.members), *step.members, *messages],
        client=queue_client,
        queue=queue,
        klass=klass,
        step="flush",
    )
    if code != 0:
        script("drop_group", on=client)(
            keys=[keys.claim_set(flush_id), keys.fold_store_size()],
            args=[_claimed_prefix(flush_id), *step.members],
        )
    return code
