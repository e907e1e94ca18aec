"""Key names: the hot path's fold members are exactly the ones fold_member() names, whatever the ids hold."""

from hypothesis import given
from hypothesis import strategies as st

from pipeline.redis import keys

IDS = st.one_of(st.integers(), st.text(max_size=30))


@given(
    user=IDS,
    kind=st.text(min_size=1, max_size=30),
    entity=st.text(max_size=60),
    klass=st.sampled_from(["routine", "background"]),
)
def test_fold_members_are_fold_member_of_each_grain(user, kind, entity, klass):
    assert keys.fold_members(user, kind, entity, klass) == (
        keys.fold_member(user, kind, entity),
        keys.fold_member(user, kind, None),
        keys.fold_member(user, None, klass),
    )
