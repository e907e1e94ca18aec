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


def test_a_queues_sub_lists_are_named_from_sluices_transport_options_not_the_hosts(settings):
    # The transport takes its options from Sluice's own (SLUICE_CELERY): the host's CELERY_ ones configure the
    # host's own app, and naming the lists from them counted a depth the transport never wrote.
    from pipeline.conf import queue_lists

    settings.CELERY_BROKER_TRANSPORT_OPTIONS = {"priority_steps": [0, 5], "sep": ":"}
    assert queue_lists("routine") == tuple(keys.priority_lists("routine"))
    settings.SLUICE_CELERY = {"broker_transport_options": {"priority_steps": [0, 5], "sep": ":"}}
    assert queue_lists("routine") == ("routine", "routine:5")
    assert keys.priority_lists("routine", (0, 5), ":") == ["routine", "routine:5"]
