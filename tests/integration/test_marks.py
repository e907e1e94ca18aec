"""The "sent" marks (pipeline.broker.marks): compact, found by a redelivery, and gone once no redelivery can come."""

import time

import pytest

from notifications.delivery.tasks import send_tasks
from pipeline.broker import deadletters, marks, reaper
from pipeline.connections import script
from pipeline.metrics import read_counters
from pipeline.redis import keys
from pipeline.sending.claims import finish_send
from sluice_tools.demo_kinds import DEMO_KINDS
from tests.waiting import wait_for

VISIBILITY_S = 2


def claim(notification_id, channel, since=None):
    mark = marks.field(notification_id, channel)
    state, _left = script("claim_send")(
        keys=[keys.sent(notification_id, channel), *marks.candidates(mark, since=since)], args=[60, mark]
    )
    return state.decode()


def finish(notification_id, channel, status="sent"):
    mark = marks.field(notification_id, channel)
    key, expire_at = marks.write_target(mark)
    finish_send(keys.sent(notification_id, channel), channel, "routine", status, 0.01, (key, mark, expire_at))


@pytest.mark.timeout(30)
def test_a_mark_is_found_by_the_next_claim_and_the_claim_is_gone(redis_client):
    assert claim("n1", "email") == "claimed"
    assert claim("n1", "email") == "sending"
    finish("n1", "email")
    assert redis_client.exists(keys.sent("n1", "email")) == 0  # the claim is dropped, the mark kept apart
    assert claim("n1", "email") == "sent"
    assert claim("n1", "email", since=time.time() - 5) == "sent"
    assert claim("n1", "email", since=time.time() + 3600) == "sent"  # a publisher's clock far ahead
    assert claim("n1", "push") == "claimed"  # per channel
    finish("n1", "push", status="failed")  # a failed send leaves no mark: a retry may send
    assert claim("n1", "push") == "claimed"


@pytest.mark.timeout(30)
def test_an_older_release_sent_key_is_still_honoured(redis_client):
    redis_client.set(keys.sent("old", "sms"), "sent", ex=60)
    assert claim("old", "sms") == "sent"


@pytest.mark.timeout(30)
def test_a_mark_hash_expires_whole_after_the_redelivery_bound(redis_client):
    mark = marks.field("n2", "email")
    key, expire_at = marks.write_target(mark)
    finish("n2", "email")
    lifetime = marks.lifetime_s()
    left = redis_client.ttl(key)
    assert lifetime <= left <= lifetime + marks.BUCKET_S
    assert expire_at - time.time() == pytest.approx(left, abs=2)
    # Once expired, no claim looks at that bucket any more.
    assert key not in marks.candidates(mark, now=expire_at + marks.CLOCK_SKEW_S + 1)
    assert key in marks.candidates(mark, now=expire_at - 1)


@pytest.mark.timeout(30)
def test_the_lifetime_follows_the_visibility_timeout_and_the_sweep(settings):
    options = {"visibility_timeout": 100, "unacked_restore_interval": 2, "unacked_restore_throttle": 5}
    settings.SLUICE_CELERY = {"broker_transport_options": options}
    assert marks.lifetime_s() == 100 + 10 + marks.QUEUE_ALLOWANCE_S
    # A reaper slower than the visibility timeout sets the bound instead: dead after 200 s, a scan every 50 s, and
    # the scan's own allowance.
    settings.SLUICE_CELERY = {"broker_transport_options": {**options, "fetch_dead_after_s": 200}}
    assert marks.lifetime_s() == 250 + reaper.SCAN_ALLOWANCE_S + marks.QUEUE_ALLOWANCE_S


@pytest.mark.timeout(30)
def test_marks_really_expire(redis_client, monkeypatch, settings):
    monkeypatch.setattr(marks, "BUCKET_S", 1)
    monkeypatch.setattr(marks, "QUEUE_ALLOWANCE_S", 0)
    monkeypatch.setattr(reaper, "SCAN_ALLOWANCE_S", 0)
    settings.SLUICE_CELERY = {"broker_transport_options": {"visibility_timeout": 1, "fetch_dead_after_s": 1}}
    monkeypatch.setattr(marks, "RESTORE_INTERVAL_S", 1)
    monkeypatch.setattr(marks, "RESTORE_THROTTLE", 1)
    assert marks.lifetime_s() == 2
    finish("n3", "email")
    assert claim("n3", "email") == "sent"
    wait_for(lambda: not redis_client.keys(f"{keys.PREFIX}:marks:*"), 10)
    assert claim("n3", "email") == "claimed"


@pytest.mark.timeout(30)
def test_marks_are_compact(redis_client):
    """Many marks cost far less than a key each (about 180 bytes): they share listpack hashes."""
    redis_client.config_set("hash-max-listpack-entries", 128)
    before = redis_client.info("memory")["used_memory"]
    count = 20_000
    pipe = redis_client.pipeline(transaction=False)
    for n in range(count):
        mark = marks.field(f"{n:032x}", "email")
        key, expire_at = marks.write_target(mark)
        pipe.hset(key, mark, 1)
        pipe.expireat(key, expire_at)
    pipe.execute()
    per_mark = (redis_client.info("memory")["used_memory"] - before) / count
    assert per_mark < 100, per_mark


KINDS = {name: {**kind, "channels": ["email", "push"]} for name, kind in DEMO_KINDS.items()}
LOCMEM = {name: {"backend": "notifications.channels.locmem.LocmemChannel"} for name in ("email", "sms", "push")}


@pytest.mark.timeout(30)
def test_a_replay_forgets_the_marks_of_the_channels_it_sends_again(redis_client, settings):
    """A permanent failure leaves a mark (a redelivery must not send it again); its replay drops that mark, and
    only that one."""
    settings.SLUICE_KINDS = KINDS
    finish("r1", "email", status="rejected")
    finish("r1", "push")
    kwargs = {"notification_id": "r1", "kind": "task.assigned", "user_id": 1, "entity_id": "e", "payload": {}}
    letter = deadletters.add("sluice.send.routine", "routine", kwargs, "permanent", "refused", 1, ["email"])
    assert claim("r1", "email") == "sent"
    assert deadletters.replay(letter) == 1
    assert claim("r1", "email") == "claimed"
    assert claim("r1", "push") == "sent"


@pytest.mark.timeout(30)
def test_the_last_send_counts_the_message_processed_in_its_own_script(redis_client, settings):
    """One processed count per message, whatever its channels, and none for a redelivery's extra round trip."""
    settings.SLUICE_KINDS, settings.SLUICE_CHANNELS = KINDS, LOCMEM
    kwargs = {"kind": "task.assigned", "user_id": 1, "entity_id": "e", "payload": {}}
    for notification_id in ("p1", "p2", "p1"):  # p1 again: both channels find their marks
        send_tasks["routine"].apply(kwargs={**kwargs, "notification_id": notification_id})
    counters = read_counters()
    assert counters["processed:routine"] == 3
    assert counters["sent:email:routine:sent"] == counters["sent:push:routine:sent"] == 2
    assert counters["sent:email:routine:duplicate"] == 1
