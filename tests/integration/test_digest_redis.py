"""The digest's own Redis (SLUICE_DIGEST["redis_url"]): four redis-servers, one per class and one for the folds.

Admission decides on the class's Redis and folds on the digest's (two round trips, only for an event it folds);
a flush claims on the digest's Redis and hands each digest over to its class's queue with a mark, so a flusher
that dies in between is taken over without a second digest. Routine's and background's Redis never hold a fold.
"""

import json
import time

import pytest
from django.contrib.auth import get_user_model

from digest import fold_store, user_claims
from digest.flush import run_flush
from notifications import Outcome, Unavailable, notify, preferences
from pipeline.conf import CLASSES
from pipeline.connections import class_redis, every_redis, fold_store_url, folds_elsewhere, get_redis
from pipeline.metrics import read_counters
from pipeline.redis import keys
from pipeline.redis.addresses import acl_rules
from tests.waiting import wait_for

from .test_per_class_redis import (
    BACKGROUND,
    BACKGROUND_CAPACITY,
    CHANNELS,
    CRITICAL,
    DIGEST,
    KINDS,
    ROUTINE,
    ROUTINE_CAPACITY,
    _servers,
    queues,
)
from .test_per_class_redis import worker_database as worker_database

User = get_user_model()
# Each of routine's and background's Redis may hold these digest keys only: a flush's handover marks.
FOLD_MARKS = (keys.pending(), keys.fold_store_size(), f"{keys.PREFIX}:digest:fold:", keys.size_trigger())


@pytest.fixture
def servers():
    started = _servers(("critical", "routine", "background", "digest"))
    yield started
    for server in started.values():
        server.stop()


@pytest.fixture
def four(settings, servers):
    urls = {name: server.url for name, server in servers.items()}
    # The digest's Redis through an ACL user with Sluice's rules and no queue at all: a queue touched there, or
    # a command Sluice's docs do not list, is refused (and in its ACL LOG).
    servers["digest"].admin().execute_command("ACL", "SETUSER", "sluice", "on", ">digest-pw", *acl_rules([]).split())
    urls["digest"] = f"redis://sluice:digest-pw@127.0.0.1:{servers['digest'].port}/0"
    settings.SLUICE_REDIS_URL = urls["routine"]
    settings.SLUICE_CHANNELS = CHANNELS
    settings.SLUICE_KINDS = {**KINDS, ROUTINE: {**KINDS[ROUTINE], "channels": ["push", "email"]}}
    settings.SLUICE_QUEUES = queues(urls)
    settings.SLUICE_DIGEST = {**DIGEST, "redis_url": urls["digest"]}
    return urls


def fill(klass, kind, capacity):
    for n in range(capacity):
        assert notify(User(pk=9), kind, entity_id=f"fill{n}") == Outcome.ACCEPTED
    assert class_redis(klass).llen(klass) == capacity


def fold_keys(url):
    return [k.decode() for k in get_redis(url).scan_iter(count=1000) if k.decode().startswith(FOLD_MARKS)]


def commands_on(server, named=None):
    """Commands a server ran (those a script ran included), but the test's own INFO, ACL and handshakes; or only
    the commands ``named``."""
    stats = server.admin().info("commandstats")
    own = ("cmdstat_info", "cmdstat_acl", "cmdstat_client", "cmdstat_hello")
    if named:
        return sum(stats.get(f"cmdstat_{name}", {"calls": 0})["calls"] for name in named)
    return sum(v["calls"] for k, v in stats.items() if not k.startswith(own))


def refused_on_digest(servers):
    return [entry for entry in servers["digest"].admin().acl_log() if entry]


@pytest.mark.timeout(120)
def test_folds_live_on_the_digest_redis_and_go_out_on_their_class_queue(four, servers, db):
    urls = four
    assert folds_elsewhere("routine")
    assert folds_elsewhere("background")
    assert len(every_redis()) == 4
    before = commands_on(servers["digest"])
    fill("routine", ROUTINE, ROUTINE_CAPACITY)
    fill("background", BACKGROUND, BACKGROUND_CAPACITY)
    assert commands_on(servers["digest"]) == before  # an event that goes out alone never reaches it
    assert notify(User(pk=1), ROUTINE, entity_id="t1") == Outcome.FOLDED
    before = commands_on(servers["digest"], named=("evalsha", "eval", "script|load"))
    assert notify(User(pk=1), ROUTINE, entity_id="t1") == Outcome.FOLDED
    # A fold: one script call there, the second round trip.
    assert commands_on(servers["digest"], named=("evalsha", "eval", "script|load")) == before + 1
    assert notify(User(pk=2), BACKGROUND, entity_id="b1") == Outcome.COLLAPSED
    digest = get_redis(urls["digest"])
    assert digest.zcard(keys.pending()) == 2
    assert fold_keys(urls["routine"]) == []
    assert fold_keys(urls["background"]) == []
    counters = read_counters()  # the fold's counters are the digest Redis's, summed with the rest
    assert counters["notifications:routine:folded"] == 2
    assert counters["notifications:background:collapsed"] == 1
    assert counters["foldgrain:routine:entity"] == 2

    from pipeline.observe.exporter import SluiceCollector

    families = {family.name: family for family in SluiceCollector(60).collect()}
    assert families["sluice_digest_pending_keys"].samples[0].value == 2

    # Room frees: the flush publishes each digest on its class's Redis and leaves no claim, mark or fold behind.
    for klass in ("routine", "background"):
        class_redis(klass).delete(klass)
    assert run_flush("beat") == 2
    routine = [json.loads(m) for m in class_redis("routine").lrange("routine", 0, -1)]
    assert len(routine) == 1
    assert routine[0]["headers"]["id"].startswith("digest-")
    assert class_redis("background").llen("background") == 1
    assert digest.zcard(keys.pending()) == 0
    assert digest.zcard(keys.claims()) == 0
    assert digest.hmget(keys.fold_store_size(), "k", "b") == [b"0", b"0"]
    for klass in ("routine", "background"):
        leftovers = [k for k in class_redis(klass).scan_iter(match=f"{keys.DIGEST_PREFIX}*")]
        assert leftovers == [], leftovers
    counters = read_counters()
    assert counters["digest:routine:published"] == 1
    assert counters["digest:background:published"] == 1
    assert refused_on_digest(servers) == []
    assert set(fold_keys(servers["digest"].url)) <= {keys.pending(), keys.fold_store_size()}


@pytest.mark.timeout(120)
def test_a_flusher_that_died_after_the_handover_is_taken_over_without_a_second_digest(four, servers, db, monkeypatch):
    fill("routine", ROUTINE, ROUTINE_CAPACITY)
    assert notify(User(pk=1), ROUTINE, entity_id="t1") == Outcome.FOLDED
    class_redis("routine").delete("routine")
    digest = get_redis(fold_store_url("routine"))

    class Died(Exception):
        """The flusher dies after handing its digest over to routine's queue, before it drops the claims."""

    scripts = user_claims.script

    class Dying:
        get = staticmethod(scripts.get)

        def __call__(self, name, on=None):
            if name == "drop_group":
                raise Died
            return scripts(name, on=on)

    monkeypatch.setattr(user_claims, "script", Dying())
    with pytest.raises(Died):
        run_flush("beat")
    monkeypatch.undo()
    [handed] = class_redis("routine").lrange("routine", 0, -1)
    [flush_id] = digest.zrange(keys.claims(), 0, -1)
    [member] = fold_store.claimed_members(flush_id.decode(), digest)
    assert class_redis("routine").exists(keys.handover(flush_id.decode()))
    digest.zadd(keys.claims(), {flush_id: time.time() - 1})  # its lease ran out
    # Another fold of the same key arrives meanwhile: it belongs to the next digest, not to the dead one's.
    assert notify(User(pk=1), ROUTINE, entity_id="t1") == Outcome.ACCEPTED  # (room now: it goes out alone)

    assert run_flush("beat") == 0  # the takeover finds the mark: nothing published twice
    assert class_redis("routine").lrange("routine", 0, -1)[-1] == handed
    assert class_redis("routine").llen("routine") == 2
    assert digest.zcard(keys.claims()) == 0
    assert not digest.exists(keys.claimed(flush_id.decode(), member))
    assert digest.hmget(keys.fold_store_size(), "k", "b") == [b"0", b"0"]
    assert not class_redis("routine").exists(keys.handover(flush_id.decode()))
    assert refused_on_digest(servers) == []


@pytest.mark.timeout(120)
def test_the_digest_redis_down_refuses_only_what_it_would_fold(
    four, servers, django_user_model, django_capture_on_commit_callbacks
):
    fill("routine", ROUTINE, ROUTINE_CAPACITY)
    mixed = django_user_model.objects.create_user("mixed")
    with django_capture_on_commit_callbacks(execute=True):  # the mirror is written once the choice is saved
        preferences.set(mixed, kind=ROUTINE, channel="email", mode="digest")
    servers["digest"].stop()

    with pytest.raises(Unavailable, match=servers["digest"].url.split("//")[1].split("/")[0]):
        notify(User(pk=1), ROUTINE, entity_id="t1")
    assert class_redis("routine").llen("routine") == ROUTINE_CAPACITY  # nothing half-admitted
    assert notify(User(pk=1), CRITICAL, entity_id="m1") == Outcome.ACCEPTED  # critical never folds

    class_redis("routine").delete("routine")
    # Push goes out now; the email copy for the digest cannot be folded: counted refused, never silent.
    assert notify(mixed, ROUTINE, entity_id="t2") == Outcome.ACCEPTED
    (message,) = [json.loads(m) for m in class_redis("routine").lrange("routine", 0, -1)]
    assert message["headers"]["sluice_channels"] == ["push"]
    assert read_counters(class_redis("routine"))["folds:routine:refused"] == 1


@pytest.mark.timeout(120)
def test_a_class_redis_down_during_a_flush_keeps_every_fold(four, servers, db):
    fill("routine", ROUTINE, ROUTINE_CAPACITY)
    for n in range(3):
        assert notify(User(pk=1), ROUTINE, entity_id=f"t{n}") == Outcome.FOLDED
    servers["routine"].stop()
    assert run_flush("beat") == 0  # said in a warning, never raised: the other stores and the drain go on
    digest = get_redis(fold_store_url("routine"))
    assert digest.zcard(keys.pending()) == 3
    assert digest.hget(keys.fold_store_size(), "k") == b"3"


def settle(urls, timeout=90):
    def empty():
        run_flush("beat")
        for klass in CLASSES:
            client = get_redis(urls[klass])
            if client.llen(klass) or client.hlen("unacked"):
                return False
        return get_redis(urls["digest"]).zcard(keys.pending()) == 0

    wait_for(empty, timeout, what="the queues and the fold store emptied")


@pytest.mark.timeout(120)
def test_bench_admission_folds_measures_one_round_trip_against_two(redis_client):
    from sluice_tools.bench import admission_folds

    result = admission_folds.run(calls=40, rounds=1)
    assert result["round_trips_per_notify"] == {"here": 1.0, "elsewhere": 2.0}
    assert result["fold_here_per_s"] > 0
    assert result["fold_elsewhere_per_s"] > 0
    assert not redis_client.exists(keys.pending())  # the bench leaves no fold behind
