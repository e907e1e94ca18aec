"""A managed Redis: TLS with the certificate verified, and an ACL user allowed only what Sluice needs.

The server speaks only TLS, with a certificate the test makes for 127.0.0.1, and knows a user ``sluice`` that
may run only pipeline.redis.addresses.ACL_COMMANDS, on Sluice's keys and Celery's channels
(pipeline.redis.addresses.acl_rules, the rules docs/redis.md gives). notify(), the folds, the digest flush,
the exporter and real workers (fetch, acks, the gate, Celery's events) all go through it: the books balance and
Redis's ACL LOG records no refused command.
"""

import json
import random
import time
from collections import Counter

import pytest
from django.contrib.auth import get_user_model
from redis.exceptions import NoPermissionError

from digest.flush import run_flush
from notifications import Unavailable, notify
from pipeline.connections import get_redis
from pipeline.observe.exporter import SluiceCollector, scaler_payload
from pipeline.observe.window import sample
from pipeline.redis.addresses import acl_rules
from pipeline.redis.addresses import make_client as get_redis_for
from tests.conftest import need
from tests.redis_topologies import TLSRedis, make_certificates, tls_support
from tests.waiting import fetching, wait_for

from .test_reliability_redis import KINDS, MIX, QUEUES, books, drained, point_at, point_back, pool, read_sends

ADMIN_PASSWORD = "admin-only-for-the-test"
PASSWORD = "s3cret/with:odd@chars"
USERS = 10


def user_rules():
    return f"sluice on >{PASSWORD} " + acl_rules(["critical", "routine", "background"])


@pytest.fixture
def tls_redis(tmp_path):
    reason = tls_support()
    if reason:
        need(reason)
    certs = make_certificates(tmp_path / "certs")
    server = TLSRedis(certs, ADMIN_PASSWORD, users=[user_rules()]).start()
    try:
        yield server
    finally:
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
    settings.SLUICE_QUEUES = QUEUES
    settings.SLUICE_CHANNELS = {name: recorder for name in ("email", "sms", "push")}
    env = {
        "SLUICE_KINDS": json.dumps(KINDS),
        "SLUICE_QUEUES": json.dumps(QUEUES),
        "DATABASE_URL": f"sqlite:///{tmp_path}/unused.db",
    }
    admin = tls_redis.admin()
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
        alive = [w.klass for w in workers if w.process.poll() is None]
    finally:
        for worker in workers:
            worker.stop()
        point_back(saved)
        get_redis()
    result = books(calls, read_sends(path), crashed_at=0)
    stats = {k.removeprefix("cmdstat_").upper(): v["calls"] for k, v in admin.info("commandstats").items()}
    admin.close()
    longest = max(c["ended"] - c["began"] for c in calls)
    figures = {
        "events": len(calls),
        "outcomes": dict(result["outcomes"]),
        "lost_singles": len(result["lost_singles"]),
        "lost_folded_events": dict(result["folds_missing"]),
        "duplicated_sends": len(result["duplicated"]),
        "longest_notify_s": round(longest, 3),
        "refused_commands": len(refused),
        "commands_run": sorted(set(stats) - {"ACL|LOG", "INFO", "AUTH"}),
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
