"""A managed Redis: TLS with the certificate verified, and an ACL user allowed only what Sluice needs.

The server speaks only TLS, with a certificate the test makes for 127.0.0.1, has a replica (over TLS too), and knows
a user ``sluice`` that may run only pipeline.redis.addresses.ACL_COMMANDS, on Sluice's keys and Celery's channels
(pipeline.redis.addresses.acl_rules, the rules docs/redis.md gives). notify(), the folds, the digest flush,
the exporter and real workers (fetch, acks, the gate, Celery's events) all go through it, critical with durability
"replicated": the books balance, every critical admission is on the replica when notify() returns, and Redis's ACL
LOG records no refused command. A user without ``wait`` gets Unavailable, and its keyed retry is sent once.
"""

import json
import random
import time
from collections import Counter

import pytest
from django.contrib.auth import get_user_model
from django.core.checks import run_checks
from redis.exceptions import NoPermissionError

from digest.flush import run_flush
from notifications import Outcome, Unavailable, notify
from pipeline.connections import get_redis
from pipeline.metrics import durability_field, notifications_field, read_counters
from pipeline.observe.exporter import SluiceCollector, scaler_payload
from pipeline.observe.window import sample
from pipeline.redis import keys
from pipeline.redis.addresses import acl_rules
from pipeline.redis.addresses import make_client as get_redis_for
from tests.conftest import need
from tests.redis_topologies import TLSRedis, make_certificates, tls_support
from tests.waiting import fetching, wait_for

from .test_reliability_redis import KINDS, MIX, QUEUES, books, drained, point_at, point_back, pool, read_sends

ADMIN_PASSWORD = "admin-only-for-the-test"
PASSWORD = "s3cret/with:odd@chars"
USERS = 10
# A user with the documented rules but WAIT, as before WAIT was in them.
NO_WAIT_USER = "sluice-nowait"
# Critical confirmed by the replica before notify() returns (docs/reliability.md, "Durable admission").
REPLICATED = {"durability": "replicated", "durability_timeout_ms": 2000}
REPLICATED_QUEUES = {**QUEUES, "critical": {**QUEUES["critical"], **REPLICATED}}


def user_rules():
    return f"sluice on >{PASSWORD} " + acl_rules(["critical", "routine", "background"])


def no_wait_rules():
    rules = [rule for rule in acl_rules(["critical", "routine", "background"]).split() if rule != "+wait"]
    return " ".join([NO_WAIT_USER, "on", f">{PASSWORD}", *rules])


@pytest.fixture
def tls_redis(tmp_path):
    """The TLS primary (its ``replica`` beside it, in sync)."""
    reason = tls_support()
    if reason:
        need(reason)
    certs = make_certificates(tmp_path / "certs")
    server = TLSRedis(certs, ADMIN_PASSWORD, users=[user_rules(), no_wait_rules()]).start()
    server.replica = None
    try:
        server.replica = TLSRedis(certs, ADMIN_PASSWORD, replica_of=server).start()
        wait_for(server.confirmed_by_a_replica, 20, what="the replica in sync over TLS")
        yield server
    finally:
        if server.replica is not None:
            server.replica.stop()
        server.stop()


def quoted(password):
    from urllib.parse import quote

    return quote(password, safe="")


def test_a_certificate_from_another_ca_is_refused_and_notify_says_unavailable(tls_redis, settings):
    """Verification is on by default: a server whose certificate the URL's CA did not sign is never used."""
    settings.SLUICE_KINDS = KINDS
    good = tls_redis.url("sluice", quoted(PASSWORD))
    rogue = good.replace("ca.crt", "rogue-ca.crt")
    saved = point_at(rogue)
    try:
        with pytest.raises(Unavailable, match="CERTIFICATE_VERIFY_FAILED") as found:
            notify(get_user_model()(pk=1), "meeting.reminder", entity_id="m-1")
        assert PASSWORD not in str(found.value)
        assert quoted(PASSWORD) not in str(found.value)
        point_at(good)
        assert str(notify(get_user_model()(pk=1), "meeting.reminder", entity_id="m-1")) == "accepted"
    finally:
        point_back(saved)


@pytest.mark.django_db
@pytest.mark.timeout(120)
def test_tls_and_a_least_privilege_acl_user_carry_the_whole_pipeline(tls_redis, settings, tmp_path):
    url = tls_redis.url("sluice", quoted(PASSWORD))
    path = tmp_path / "sends.jsonl"
    recorder = {"backend": "tests.system.test_reliability_redis.FileRecorder", "options": {"path": str(path)}}
    settings.SLUICE_KINDS = KINDS
    settings.SLUICE_QUEUES = REPLICATED_QUEUES
    settings.SLUICE_CHANNELS = {name: recorder for name in ("email", "sms", "push")}
    env = {
        "SLUICE_KINDS": json.dumps(KINDS),
        "SLUICE_QUEUES": json.dumps(REPLICATED_QUEUES),
        "DATABASE_URL": f"sqlite:///{tmp_path}/unused.db",
    }
    admin = tls_redis.admin()
    replica = tls_redis.replica.admin()
    accepted_field = notifications_field("critical", "accepted")
    critical_accepted = 0
    not_on_the_replica = []
    saved = point_at(url)
    workers = [pool(klass, url, recorder, env) for klass in ("critical", "routine", "background")]
    calls = []
    try:
        for worker in workers:
            worker.start()
        wait_for(lambda: fetching(len(workers)), 60, what="every worker connected and fetching")
        users = [get_user_model()(pk=pk) for pk in range(1, USERS + 1)]
        weights = [w for *_, w in MIX]
        rng = random.Random(17)
        for seq in range(1, 601):
            klass, kind, _ = rng.choices(MIX, weights=weights)[0]
            entity = {"critical": f"m-{seq}", "routine": f"task-{seq % 7}", "background": f"board-{seq % 3}"}[klass]
            began = time.time()
            try:
                outcome = str(notify(rng.choice(users), kind, entity_id=entity, payload={"seq": seq}))
            except Unavailable:
                outcome = "unavailable"
            calls.append({"seq": seq, "class": klass, "outcome": outcome, "began": began, "ended": time.time()})
            if klass == "critical" and outcome == "accepted":
                # Confirmed by WAIT before notify() returned: the replica counts it already (counters only grow).
                critical_accepted += 1
                if int(replica.hget(keys.counters(), accepted_field) or 0) < critical_accepted:
                    not_on_the_replica.append(seq)
            if seq % 200 == 0:
                sample(60)  # what the exporter's sampler does
                list(SluiceCollector(60).collect())
                scaler_payload("critical", 60)
        client = get_redis()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            run_flush("test")
            if drained(client):
                time.sleep(1)
                if drained(client):
                    break
            time.sleep(0.3)
        settled = drained(client)
        refused = admin.acl_log()
        unconfirmed = {
            step: read_counters(client).get(durability_field("critical", step), 0) for step in ("admission", "end")
        }
        checks = [e.id for e in run_checks() if e.id in ("sluice.E008", "sluice.W004")]
        alive = [w.klass for w in workers if w.process.poll() is None]
    finally:
        for worker in workers:
            worker.stop()
        point_back(saved)
        get_redis()
    result = books(calls, read_sends(path), crashed_at=0)
    stats = {k.removeprefix("cmdstat_").upper(): v["calls"] for k, v in admin.info("commandstats").items()}
    admin.close()
    replica.close()
    longest = max(c["ended"] - c["began"] for c in calls)
    figures = {
        "events": len(calls),
        "outcomes": dict(result["outcomes"]),
        "lost_singles": len(result["lost_singles"]),
        "lost_folded_events": dict(result["folds_missing"]),
        "duplicated_sends": len(result["duplicated"]),
        "longest_notify_s": round(longest, 3),
        "critical_replicated_confirmed": critical_accepted,
        "unconfirmed": unconfirmed,
        "refused_commands": len(refused),
        "commands_run": sorted(set(stats) - {"ACL|LOG", "INFO", "AUTH", "PSYNC", "REPLCONF"}),
    }
    print(f"\nFIGURES tls+acl {json.dumps(figures)}")
    assert settled
    # The user really is confined: a command outside the list, or a key outside Sluice's, is refused.
    confined = get_redis_for(url)
    with pytest.raises(NoPermissionError):
        confined.flushdb()
    with pytest.raises(NoPermissionError):
        confined.set("someone-else:key", 1)
    confined.close()
    assert alive == ["critical", "routine", "background"]
    assert refused == [], refused
    assert not [w.name for w in workers if "NOPERM" in w.output()]
    assert Counter(c["outcome"] for c in calls)["unavailable"] == 0
    assert result["lost_singles"] == []
    assert result["folds_missing"] == {}
    assert result["duplicated"] == {}
    assert {"accepted", "folded", "collapsed"} <= set(result["outcomes"])
    assert critical_accepted > 0
    assert not_on_the_replica == []
    assert unconfirmed == {"admission": 0, "end": 0}
    assert checks == []


@pytest.mark.django_db
@pytest.mark.timeout(120)
@pytest.mark.expected_errors("refused WAIT")
def test_a_user_without_wait_is_unavailable_and_its_keyed_retry_is_sent_once(tls_redis, settings, tmp_path):
    """The rules of docs/redis.md before WAIT was in them: the event is written and WAIT refused, so notify() raises
    Unavailable (not NoPermissionError) and check fails; the keyed retries send nothing more, and once the user may
    run WAIT the retry is answered with the first call's outcome and the worker sends the event once."""
    url = tls_redis.url("sluice", quoted(PASSWORD))
    locked = tls_redis.url(NO_WAIT_USER, quoted(PASSWORD))
    path = tmp_path / "sends.jsonl"
    recorder = {"backend": "tests.system.test_reliability_redis.FileRecorder", "options": {"path": str(path)}}
    settings.SLUICE_KINDS = KINDS
    settings.SLUICE_QUEUES = REPLICATED_QUEUES
    settings.SLUICE_CHANNELS = {name: recorder for name in ("email", "sms", "push")}
    env = {
        "SLUICE_KINDS": json.dumps(KINDS),
        "SLUICE_QUEUES": json.dumps(REPLICATED_QUEUES),
        "DATABASE_URL": f"sqlite:///{tmp_path}/unused.db",
    }
    admin = tls_redis.admin()
    worker = pool("critical", url, recorder, env)  # the worker's user may run WAIT; only the caller's may not
    saved = point_at(locked)
    user = get_user_model()(pk=1)
    try:
        worker.start()
        wait_for(lambda: fetching(1), 60, what="the worker connected and fetching")
        failing = [e for e in run_checks() if e.id == "sluice.E008"]
        for _ in range(3):
            with pytest.raises(Unavailable, match="refused WAIT"):
                notify(user, "meeting.reminder", entity_id="m-1", payload={"seq": 1}, idempotency_key="order-1")
        admin.execute_command("ACL", "SETUSER", NO_WAIT_USER, "+wait")
        passing = [e for e in run_checks() if e.id in ("sluice.E008", "sluice.W004")]
        retried = notify(user, "meeting.reminder", entity_id="m-1", payload={"seq": 1}, idempotency_key="order-1")
        client = get_redis()
        wait_for(lambda: read_sends(path), 30, what="the event sent")
        wait_for(lambda: drained(client), 30, what="the queue drained")
        refused = admin.acl_log()
        alive = worker.process.poll() is None
    finally:
        worker.stop()
        point_back(saved)
        get_redis()
        admin.close()
    sends = read_sends(path)
    print(f"\nFIGURES tls+acl, WAIT refused: {len(sends)} send(s) of 4 calls; ACL LOG {[e['object'] for e in refused]}")
    assert [e.id for e in failing] == ["sluice.E008"]
    assert passing == []
    assert retried is Outcome.ACCEPTED
    assert [s["seq"] for s in sends] == [1], "sent once"
    assert alive
    assert {(e["username"], e["object"]) for e in refused} == {(NO_WAIT_USER, "wait")}
