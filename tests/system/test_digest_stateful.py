"""Hypothesis drives folds, claims, publishes, give-backs, crashes and flushes in any order, on the path the flush
takes (whole users claimed, a user's digest published with the release of its claims): the counts add up."""

import base64
import json
import uuid

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule, run_state_machine_as_test

from digest import fold_store
from digest.flush import _publish, run_flush
from digest.user_claims import claim_users
from pipeline.connections import get_redis
from pipeline.redis import keys
from tests.digest_helpers import fold

ENTITIES = ["a", "a|b", "b", 'a"|"b']


class FoldAndFlush(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.client = get_redis()
        self.client.flushdb()
        self.folded = 0
        self.delivered = []  # kwargs of every message taken off the queue
        self.flush_ids = []

    @rule(user=st.integers(1, 3), entity=st.sampled_from(ENTITIES), times=st.integers(1, 3))
    def fold(self, user, entity, times):
        for _ in range(times):
            fold(user, entity_id=entity)
        self.folded += times

    @rule(users=st.integers(1, 3), limit=st.integers(1, 4))
    def claim(self, users, limit):
        flush_id = uuid.uuid4().hex
        if claim_users(flush_id, users, limit, 60, self.client):
            self.flush_ids.append(flush_id)

    @precondition(lambda self: self.flush_ids)
    @rule(data=st.data())
    def publish_one(self, data):
        flush_id = data.draw(st.sampled_from(self.flush_ids))
        members = fold_store.claimed_members(flush_id, self.client)
        if members:
            # The flush's own path: the member's digest published with the release of its claim, in one step.
            _publish(flush_id, [data.draw(st.sampled_from(members))], set(), self.client, ["routine", "background"])
        fold_store.release(flush_id, self.client)

    @precondition(lambda self: self.flush_ids)
    @rule(data=st.data())
    def give_back_one(self, data):
        flush_id = data.draw(st.sampled_from(self.flush_ids))
        members = fold_store.claimed_members(flush_id, self.client)
        if members:
            fold_store.unclaim(flush_id, data.draw(st.sampled_from(members)), self.client)

    @precondition(lambda self: self.flush_ids)
    @rule(data=st.data())
    def flusher_dies(self, data):
        # Its lease runs out at once, as if it had died long ago.
        self.client.zadd(keys.claims(), {data.draw(st.sampled_from(self.flush_ids)): 0}, xx=True)

    @rule()
    def flush(self):
        run_flush("test")

    @rule()
    def worker_takes_everything(self):
        while raw := self.client.rpop("routine"):
            self.delivered.append(json.loads(base64.b64decode(json.loads(raw)["body"]))[1])

    def counted(self, pattern_keys):
        pipe = self.client.pipeline(transaction=False)
        for key in pattern_keys:
            pipe.hget(key, "n")
        return sum(int(n) for n in pipe.execute() if n)

    @invariant()
    def every_fold_is_pending_claimed_or_published_exactly_once(self):
        pending = self.counted(keys.fold(m.decode()) for m in self.client.zrange(keys.pending(), 0, -1))
        claimed = self.counted(
            keys.claimed(f, m) for f in self.flush_ids for m in fold_store.claimed_members(f, self.client)
        )
        queued = [
            json.loads(base64.b64decode(json.loads(raw)["body"]))[1] for raw in self.client.lrange("routine", 0, -1)
        ]
        sent = self.delivered + queued
        assert pending + claimed + sum(m["count"] for m in sent) == self.folded
        assert len({m["notification_id"] for m in sent}) == len(sent)

    @invariant()
    def the_store_knows_its_own_size(self):
        # The bound is only as good as this count: every fold hash, pending or claimed, and its payload bytes.
        hashes = [
            *self.client.scan_iter(keys.fold("*")),
            *self.client.scan_iter(keys.claimed("*", "*")),
        ]
        pipe = self.client.pipeline(transaction=False)
        for key in hashes:
            pipe.hget(key, "z")
        size = self.client.hgetall(keys.fold_store_size())
        assert int(size.get(b"k", 0)) == len(hashes)
        assert int(size.get(b"b", 0)) == sum(int(z) for z in pipe.execute())

    @invariant()
    def no_fold_is_both_pending_and_claimed_under_one_flush(self):
        for flush_id in self.flush_ids:
            for member in fold_store.claimed_members(flush_id, self.client):
                assert self.client.exists(keys.claimed(flush_id, member))


@pytest.mark.django_db
@pytest.mark.timeout(300)
def test_fold_and_flush_interleavings(redis_client):
    run_state_machine_as_test(
        FoldAndFlush,
        settings=settings(
            max_examples=60, stateful_step_count=40, deadline=None, suppress_health_check=[HealthCheck.too_slow]
        ),
    )
