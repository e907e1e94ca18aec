"""Fixtures and bookkeeping shared by the system tests of a class on a real Redis Cluster (test_cluster_*)."""

import json
import os
import signal
import threading
import time
from collections import Counter

import pytest
from django.contrib.auth import get_user_model

from notifications import Outcome, Rejected, Unavailable, notify
from pipeline.conf import sluice_settings
from pipeline.connections import get_redis, reset
from pipeline.redis.addresses import acl_rules
from sluice_tools.bench.provider import SENT_KEY
from sluice_tools.processes import WorkerProcess
from sluice_tools.redis_cluster import RedisCluster, cluster_support
from tests.conftest import need
from tests.integration.test_per_class_redis import CHANNELS, KINDS
from tests.waiting import POLL_S, wait_for

CRITICAL = "meeting.reminder"
ROUTINE = "task.assigned"
PARTITIONS = 6
# A dead consumer's fetched and unacked messages go back this soon (the reaper); a send killed mid-way keeps its
# claim until the visibility timeout, so a redelivery of it waits that long: both short, as in bench kills.
DEAD_AFTER_S = 6
VISIBILITY_S = 10
User = get_user_model()  # unsaved users with a pk: notify() takes them as they are


@pytest.fixture(scope="module")
def cluster():
    """A Redis Cluster of 3 primaries and 3 replicas, one per test module (a test may fail a shard over or move
    slots: the next module starts afresh)."""
    reason = cluster_support()
    if reason:
        need(reason)
    started = RedisCluster().start()
    yield started
    started.stop()


def queues(cluster_url, plain_url, capacity=600, **critical):
    """Critical on the cluster (``critical``: more of its settings, e.g. durability); routine, background plain."""
    return {
        "critical": {
            "capacity": capacity,
            "wait_ms": 0,
            "redis_url": cluster_url,
            "partitions": PARTITIONS,
            **critical,
        },
        "routine": {"capacity": 100, "redis_url": plain_url, "batch": 1},
        "background": {"capacity": 100, "redis_url": plain_url, "batch": 1},
    }


def transport_env():
    """The workers' environment for a short reaper bound and visibility timeout (settings/sluice.py reads it)."""
    return {"SLUICE_FETCH_DEAD_AFTER_S": str(DEAD_AFTER_S), "SLUICE_VISIBILITY_TIMEOUT_S": str(VISIBILITY_S)}


def use_cluster(settings, cluster, plain_url, queue_settings):
    """Empty the cluster and the plain Redis; point this process's settings at them."""
    for node in cluster.primaries():
        node.admin().flushall()
    get_redis(plain_url).flushdb()
    settings.SLUICE_CHANNELS = CHANNELS
    settings.SLUICE_KINDS = KINDS
    settings.SLUICE_QUEUES = queue_settings
    settings.SLUICE_CELERY = {
        "broker_transport_options": {"fetch_dead_after_s": DEAD_AFTER_S, "visibility_timeout": VISIBILITY_S}
    }
    reset()


def add_acl_user(cluster, password, classes=("critical", "routine", "background")):
    """The documented ACL user ``sluice`` (pipeline.redis.addresses.acl_rules) with ``password`` on every node, and
    every node's ACL LOG emptied."""
    rules = acl_rules(list(classes), cluster=True).split()
    for node in cluster.nodes():
        with node.admin() as client:
            client.execute_command("ACL", "SETUSER", "sluice", "reset", "on", f">{password}", *rules)
            client.execute_command("ACL", "LOG", "RESET")


def acl_log(cluster):
    """What the nodes' ACL LOG recorded: every command or key refused to a user."""
    found = []
    for node in cluster.nodes():
        with node.admin() as client:
            found += client.execute_command("ACL", "LOG")
    return found


def start_worker(queue_settings, plain_url, env=None, concurrency=2, wait=True, klass="critical", channels=CHANNELS):
    """A worker of ``klass`` in a process group of its own (os.killpg reaches its prefork children)."""
    environment = {"SLUICE_KINDS": json.dumps(KINDS), "SLUICE_QUEUES": json.dumps(queue_settings), **(env or {})}
    worker = WorkerProcess(klass, plain_url, channels, env=environment, extra=["--concurrency", str(concurrency)])
    worker.new_session = True
    if not wait:
        worker.ready_text = None  # events keep arriving while a replacement starts
    return worker.start()


def kill(worker):
    """kill -9 of the worker's whole process group."""
    os.killpg(worker.process.pid, signal.SIGKILL)
    worker.process.wait(10)
    return time.time()


def partitions():
    return sluice_settings().queues["critical"].every_partition


def partition_depths():
    client = get_redis(sluice_settings().queues["critical"].redis_url)
    return [client.llen(part.name) for part in partitions()]


def held(cluster):
    """What the workers hold, on every primary: messages in consumers' processing lists, and kombu's unacked
    records (scanned node by node: a slot may have moved, so no key is looked for at a fixed place)."""
    processing = unacked = 0
    for node in cluster.primaries():
        client = node.admin()
        for key in client.scan_iter(match="*:fetch:*:processing:*", count=1000):
            processing += client.llen(key)
        for key in client.scan_iter(match="*}unacked", count=1000):
            unacked += client.hlen(key)
    return processing, unacked


def drained(cluster):
    """Nothing queued in any partition, nothing held by a consumer."""
    return not any(partition_depths()) and held(cluster) == (0, 0)


def sent(plain_url):
    return [json.loads(raw) for raw in get_redis(plain_url).lrange(SENT_KEY, 0, -1)]


def settle(cluster, producer, plain_url, timeout=120):
    """Stop the traffic, wait until the cluster holds nothing (every partition drained, nothing fetched or unacked),
    and return the recorded sends."""
    producer.halt()
    wait_for(lambda: drained(cluster), timeout, what=lambda: f"drained: {partition_depths()}, held {held(cluster)}")
    return sent_once_settled(producer, plain_url)


def stop_all(producer, workers):
    """Stop the producer and every worker (a test's finally)."""
    producer.halt()
    for worker in workers:
        worker.stop()


def sent_once_settled(producer, plain_url, timeout=15):
    """The recorded sends, once every accepted event is among them or ``timeout`` passed (a send that just ended
    records a moment later; what never comes is the books' to count as lost)."""
    deadline = time.monotonic() + timeout
    while True:
        records = sent(plain_url)
        if set(producer.accepted()) <= {r["entity_id"] for r in records} or time.monotonic() > deadline:
            return records
        time.sleep(POLL_S)


class Producer(threading.Thread):
    """notify() of one new critical event after another, for users ``1..users`` in turn (so every partition gets its
    share), at about ``rate`` a second; each call's outcome is kept with its entity id and when it returned."""

    def __init__(self, users=600, rate=100, kind=CRITICAL):
        super().__init__(daemon=True)
        self.stop = threading.Event()
        self.users, self.rate, self.kind = users, rate, kind
        self.calls = []  # (entity_id, outcome, ended)

    def run(self):
        seq = 0
        while not self.stop.is_set():
            seq += 1
            user = User(pk=1 + seq % self.users, username="u")
            entity = f"e{seq}"
            try:
                outcome = str(notify(user, self.kind, entity_id=entity, payload={"seq": seq}))
            except Rejected:
                outcome = "rejected"
            except Unavailable:
                outcome = "unavailable"
            except Exception as error:  # noqa: BLE001  counted and asserted on: a producer must only ever hear an outcome
                outcome = f"error:{type(error).__name__}: {error}"
            self.calls.append((entity, outcome, time.time()))
            time.sleep(1 / self.rate)

    def accepted(self):
        return [entity for entity, outcome, _ in self.calls if outcome == Outcome.ACCEPTED]

    def wait_calls(self, more, timeout=60):
        """Wait until this producer has made ``more`` calls beyond those made so far: traffic flowing, not a time."""
        target = len(self.calls) + more
        wait_for(lambda: len(self.calls) >= target, timeout, what=f"{more} more notify() calls")

    def outcomes(self, since=0):
        """How many calls had each outcome (from call number ``since`` on)."""
        return Counter(outcome for _, outcome, _ in self.calls[since:])

    def halt(self):
        self.stop.set()
        self.join(30)


def books(producer, records, kills=()):
    """Lost (accepted, never sent) and doubled (an entity or a message id sent more than once), and how many of the
    doubled a kill explains: its first copy's worker was killed after the provider returned it, before its record."""
    by_entity = {}
    for record in records:
        by_entity.setdefault(record["entity_id"], []).append(record)
    accepted = producer.accepted()
    ids = Counter(record["id"] for record in records)
    doubled = {entity: copies for entity, copies in by_entity.items() if len(copies) > 1}
    explained = [
        entity
        for entity, copies in doubled.items()
        if any(copies[0]["pgid"] == pgid and copies[0]["done"] <= at for at, pgid in kills)
    ]
    return {
        "accepted": len(accepted),
        "sent": len(records),
        "lost": [entity for entity in accepted if entity not in by_entity],
        "doubled": sorted(doubled),
        "doubled_ids": sorted(i for i, n in ids.items() if n > 1),
        "doubled_explained_by_a_kill": len(explained),
        "unknown": sorted(set(by_entity) - set(accepted)),
    }
