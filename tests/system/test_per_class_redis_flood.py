"""A routine flood on per-class Redis servers, real workers: critical's Redis untouched, nothing lost."""

import json

import pytest

from pipeline.conf import CLASSES
from pipeline.connections import get_redis
from tests.integration.test_per_class_redis import (  # noqa: F401  (pytest finds the fixtures among them by name)
    FOREIGN,
    Monitor,
    balanced,
    books,
    flood,
    per_class,
    servers,
    settle,
    start_worker,
    worker_database,
)


@pytest.mark.timeout(300)
def test_routine_flood_never_touches_criticals_redis_and_nothing_is_lost(per_class, worker_database, db):
    urls = per_class
    workers = [start_worker(klass, urls, worker_database).start() for klass in CLASSES]
    monitor = Monitor(urls["critical"])
    monitor.start()
    assert monitor.ready.wait(10)
    try:
        outcomes, waits = flood()
        settle(urls)
    finally:
        monitor.stop()
        for worker in workers:
            worker.stop()
    by_class, duplicated, longest = books(urls, outcomes, waits)
    print(
        f"\nper-class Redis: {json.dumps(by_class)} duplicated={duplicated} longest_wait_ms={json.dumps(longest)} "
        f"critical_redis_commands={len(monitor.commands)}"
    )

    foreign = [c for c in monitor.commands if any(mark in c for mark in FOREIGN) and "sluice:prefs:" not in c]
    assert monitor.commands, "MONITOR saw nothing on critical's Redis"
    assert not foreign, f"critical's Redis saw {len(foreign)} routine/background commands, e.g. {foreign[:3]}"
    critical = get_redis(urls["critical"])
    critical_keys = [k.decode() for k in critical.scan_iter(count=1000)]
    # kombu's exchange tables (the queues' exchange, "sluice"); they hold bindings only.
    bindings = [k for k in critical_keys if k.startswith("_kombu.binding")]
    members = [m.decode() for k in bindings if critical.type(k) == b"set" for m in critical.smembers(k)]
    assert members
    assert all(m.split("\x06\x16")[-1] == "critical" for m in members), members
    others = [k for k in critical_keys if k not in bindings and any(mark.strip() in k for mark in FOREIGN)]
    assert not others, others
    balanced(by_class, duplicated, workers)
