"""The send claim and the channel gate in one round trip (claim_gate.lua), when both live on one Redis."""

import threading
import uuid

import pytest

from notifications.channels.base import Message
from notifications.delivery.tasks import send_tasks
from pipeline.connections import lua_source, script
from pipeline.gates import gate
from pipeline.metrics import read_counters, sent_field
from pipeline.redis import keys
from pipeline.sending.claims import ClaimedElsewhere, claim, gated_claim, record_end
from tests.waiting import wait_for

LOCMEM = "notifications.channels.locmem.LocmemChannel"
# One token a second, burst 1: after one grant the gate has no room for about a second.
SMS = {"backend": LOCMEM, "rate_per_s": 1, "burst": 1, "hold_ms": 200}


@pytest.fixture
def channels(settings, locmem_channels):
    def configure(**sms):
        settings.SLUICE_CHANNELS = {
            "email": {"backend": LOCMEM},
            "push": {"backend": LOCMEM},
            "sms": {**SMS, **sms},
        }

    configure()
    return configure


def message(klass="routine", channel="sms", notification_id=None):
    return Message(
        id=notification_id or uuid.uuid4().hex,
        channel=channel,
        kind="test.kind",
        klass=klass,
        user_id=1,
        entity_id="e1",
        subject="s",
        body="b",
    )


def evalsha_calls(client):
    """Scripts called by clients (a script's own commands are counted under their names, never as EVALSHA)."""
    return client.info("commandstats").get("cmdstat_evalsha", {}).get("calls", 0)


def gate_state(client, channel="sms"):
    return client.hgetall(keys.gate(channel)[0])


def test_a_granted_claim_is_one_round_trip_and_holds_both(redis_client, channels):
    # Loaded first: a script's first EVALSHA on a Redis is refused (NOSCRIPT) and counted, then sent again.
    redis_client.script_load(lua_source(script.path("claim_gate")))
    sms = message()
    before = evalsha_calls(redis_client)
    with gated_claim(sms) as claimed:
        assert claimed is True
        assert evalsha_calls(redis_client) - before == 1
        assert redis_client.get(keys.sent(sms.id, "sms")) == b"sending"
        assert float(gate_state(redis_client)[b"tk"]) < 1  # the gate's one token went with the claim
    # A second send of the same notification is held elsewhere until the first one ends.
    with pytest.raises(ClaimedElsewhere), gated_claim(sms):
        pass


def test_gate_refusal_leaves_no_claim_behind(redis_client, channels):
    with gate.slot("sms", "routine"):  # takes the bucket's only token
        pass
    sms = message()
    with pytest.raises(gate.GateTimeout), gated_claim(sms, max_wait_s=0):
        pass
    assert not redis_client.exists(keys.sent(sms.id, "sms"))
    # Once the bucket refills the same send is granted and claimed.
    with gated_claim(sms, max_wait_s=5) as claimed:
        assert claimed is True
        assert redis_client.get(keys.sent(sms.id, "sms")) == b"sending"


def test_a_claim_held_elsewhere_takes_no_room_at_the_gate(redis_client, channels):
    channels(concurrency=1)
    sms = message()
    assert claim(sms) is True  # another worker holds it
    with pytest.raises(ClaimedElsewhere) as held, gated_claim(sms, max_wait_s=0):
        pass
    assert held.value.expires_in_s > 0
    assert not gate_state(redis_client)  # never asked: no token taken, no state written
    assert not redis_client.zcard(keys.gate("sms")[2])  # no concurrency slot held
    with gated_claim(message(), max_wait_s=0) as claimed:  # the gate's one token is still there
        assert claimed is True
        assert redis_client.zcard(keys.gate("sms")[2]) == 1
    assert not redis_client.zcard(keys.gate("sms")[2])  # the slot is given back after the block


def test_a_send_already_sent_is_a_duplicate_without_a_gate_grant(redis_client, channels):
    sms = message(klass="critical")
    with gated_claim(sms) as claimed:
        assert claimed is True
    record_end(sms, "sent")
    assert not redis_client.exists(keys.sent(sms.id, "sms"))
    tokens_before = gate_state(redis_client)[b"tk"]
    with gated_claim(sms, max_wait_s=0) as claimed:
        assert claimed is False
    assert gate_state(redis_client)[b"tk"] == tokens_before
    assert read_counters(redis_client).get(sent_field("sms", "critical", "duplicate")) == 1


@pytest.mark.timeout(30)
def test_a_critical_send_waiting_in_the_script_holds_lower_classes_back(redis_client, channels):
    with gate.slot("sms", "routine"):  # the token is gone for about a second
        pass
    critical = message(klass="critical")
    granted = threading.Event()

    def send_critical():
        with gated_claim(critical, max_wait_s=10) as claimed:
            assert claimed is True
            granted.set()

    thread = threading.Thread(target=send_critical)
    thread.start()
    waiting = keys.gate("sms")[1]
    wait_for(lambda: redis_client.zcard(waiting) or granted.is_set(), timeout=5, what="critical waiting")
    if not granted.is_set():
        # The waiting critical holds no claim yet, and a background send behind it gets no room.
        assert not redis_client.exists(keys.sent(critical.id, "sms"))
        with pytest.raises(gate.GateTimeout), gated_claim(message(klass="background"), max_wait_s=0):
            pass
    thread.join(timeout=10)
    assert granted.is_set()
    assert redis_client.get(keys.sent(critical.id, "sms")) == b"sending"


def test_a_channel_without_a_gate_only_claims(redis_client, channels):
    email = message(channel="email")
    with gated_claim(email) as claimed:
        assert claimed is True
    assert redis_client.get(keys.sent(email.id, "email")) == b"sending"
    assert not redis_client.keys(keys.gate("email")[0] + "*")


@pytest.mark.django_db
def test_a_single_gated_send_is_two_scripts_claim_and_gate_then_its_end(
    redis_client, channels, locmem_channels, settings
):
    channels(rate_per_s=1000, burst=10)
    settings.SLUICE_KINDS = {"test.critical": {"class": "critical", "channels": ["sms"]}}
    task = send_tasks["critical"]
    kwargs = {"kind": "test.critical", "user_id": 1, "entity_id": "e", "payload": {"title": "x"}}
    task.apply(kwargs={**kwargs, "notification_id": uuid.uuid4().hex})  # warm: scripts loaded
    before = evalsha_calls(redis_client)
    result = task.apply(kwargs={**kwargs, "notification_id": uuid.uuid4().hex})
    assert result.successful(), result.traceback
    assert len(locmem_channels) == 2
    # Before: the gate, the claim and the end were three scripts.
    assert evalsha_calls(redis_client) - before == 2
