"""Idempotency keys when the folds live on the digest's own Redis (fold_handed.lua, the second round trip).

The key lives on the class's Redis and is decided in admit_event.lua there: a replay never reaches the digest's
Redis. A handover records the outcome the fold comes to; a fold that is then refused (store full, that Redis
down) drops the key again, so the caller's retry is decided afresh.
"""

import pytest

from notifications import Outcome, Rejected, Unavailable, notify
from notifications.api import NOTIFY_SCOPE
from pipeline.connections import class_redis, get_redis
from pipeline.redis import keys

from .test_digest_redis import commands_on, fill, four, servers  # noqa: F401  (fixtures)
from .test_per_class_redis import ROUTINE, ROUTINE_CAPACITY, User


def recorded(key):
    value = class_redis("routine").get(keys.idempotency(NOTIFY_SCOPE, key))
    return value.decode() if value is not None else None


@pytest.mark.timeout(60)
def test_a_replayed_fold_never_reaches_the_digest_redis(four, servers):  # noqa: F811
    fill("routine", ROUTINE, ROUTINE_CAPACITY)
    assert notify(User(pk=1), ROUTINE, entity_id="t1", idempotency_key="k") == Outcome.FOLDED
    assert recorded("k") == "folded"
    before = commands_on(servers["digest"])
    assert notify(User(pk=1), ROUTINE, entity_id="t1", idempotency_key="k") == Outcome.FOLDED
    assert commands_on(servers["digest"]) == before
    digest = get_redis(four["digest"])
    (member,) = digest.zrange(keys.pending(), 0, -1)
    assert digest.hget(keys.fold(member.decode()), "n") == b"1"  # folded once


@pytest.mark.timeout(60)
@pytest.mark.expected_errors("the fold store is full")
def test_a_fold_the_full_store_refused_records_nothing(four, servers, settings):  # noqa: F811
    settings.SLUICE_DIGEST = {**settings.SLUICE_DIGEST, "max_fold_keys": 1}
    fill("routine", ROUTINE, ROUTINE_CAPACITY)
    assert notify(User(pk=1), ROUTINE, entity_id="t1") == Outcome.FOLDED  # the store's one key
    with pytest.raises(Rejected):
        notify(User(pk=2), ROUTINE, entity_id="t2", idempotency_key="k")
    assert recorded("k") is None
    class_redis("routine").delete("routine")
    assert notify(User(pk=2), ROUTINE, entity_id="t2", idempotency_key="k") == Outcome.ACCEPTED
    assert class_redis("routine").llen("routine") == 1


@pytest.mark.timeout(60)
def test_the_digest_redis_down_records_nothing(four, servers):  # noqa: F811
    fill("routine", ROUTINE, ROUTINE_CAPACITY)
    servers["digest"].stop()
    with pytest.raises(Unavailable):
        notify(User(pk=1), ROUTINE, entity_id="t1", idempotency_key="k")
    assert recorded("k") is None
    class_redis("routine").delete("routine")
    assert notify(User(pk=1), ROUTINE, entity_id="t1", idempotency_key="k") == Outcome.ACCEPTED
    assert recorded("k") == "accepted"
