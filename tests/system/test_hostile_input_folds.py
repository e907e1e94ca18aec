"""Hostile input, property tests of the fold keys and entity ids: many generated cases each."""

import json

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from notifications import InvalidEntityId, Outcome
from pipeline.redis import keys
from tests.unit.test_hostile_input import (  # noqa: F401  (pytest finds the fixtures among them by name)
    FEW,
    FUZZ,
    SPECIAL,
    TEXT,
    USER_IDS,
    assert_nothing_grew,
    call,
    entity_id_ok,
    footprint,
    split3,
    valid,
)


@FUZZ
@given(entity_id=TEXT)
def test_entity_id_is_accepted_exactly_when_the_rule_says(redis_client, valid, entity_id):
    before = footprint(redis_client)
    if entity_id_ok(entity_id):
        assert call({**valid, "entity_id": entity_id}) is Outcome.ACCEPTED
    else:
        with pytest.raises(InvalidEntityId):
            call({**valid, "entity_id": entity_id})
        assert_nothing_grew(before, footprint(redis_client))


@FUZZ
@given(user_id=USER_IDS, kind=TEXT, entity_id=TEXT, other=st.tuples(USER_IDS, TEXT, TEXT))
def test_fold_member_is_injective(user_id, kind, entity_id, other):
    member = keys.fold_member(user_id, kind, entity_id)
    # It decodes back to its triple, so two different triples can never share a member.
    assert json.loads(member) == [user_id, kind, entity_id]
    assert (member == keys.fold_member(*other)) == ((user_id, kind, entity_id) == other)


@FUZZ
@given(
    text=st.lists(st.one_of(SPECIAL, st.sampled_from("ab|:\"'")), max_size=12).map("".join),
    cuts=st.tuples(*[st.integers(0, 50)] * 4),
)
def test_fold_members_of_one_string_cut_differently_differ(text, cuts):
    # The naive "user|kind|entity" collides exactly here: the same characters, separators moved.
    first, second = split3(text, *cuts[:2]), split3(text, *cuts[2:])
    assume(first != second)
    assert keys.fold_member(*first) != keys.fold_member(*second)


@FEW
@given(entity_ids=st.lists(TEXT.filter(entity_id_ok), min_size=1, max_size=8, unique=True))
def test_distinct_entity_ids_fold_into_distinct_digest_keys(redis_client, valid, settings, entity_ids):
    settings.SLUICE_QUEUES = {"routine": {"capacity": 1}}
    redis_client.flushdb()
    assert call({**valid, "entity_id": "filler"}) is Outcome.ACCEPTED
    for entity_id in entity_ids:
        assert call({**valid, "entity_id": entity_id}) is Outcome.FOLDED
    assert redis_client.zcard(keys.pending()) == len(entity_ids)
    for entity_id in entity_ids:
        assert redis_client.exists(keys.fold(keys.fold_member(valid["user"], valid["kind"], entity_id)))
