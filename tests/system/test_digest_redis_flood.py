"""A flood folding on a Redis of the digest's own, with real workers: nothing lost (a flood: the system tier)."""

import json

import pytest

from pipeline.conf import CLASSES
from tests.integration.test_digest_redis import (  # noqa: F401  (pytest finds the fixtures among them by name)
    FOLD_MARKS,
    four,
    refused_on_digest,
    servers,
    settle,
)
from tests.integration.test_per_class_redis import KINDS, Monitor, balanced, books, flood, start_worker
from tests.integration.test_per_class_redis import worker_database as worker_database


@pytest.mark.timeout(300)
def test_a_flood_folds_on_the_digest_redis_and_nothing_is_lost(four, servers, settings, worker_database, db):
    urls = four
    settings.SLUICE_KINDS = KINDS  # the workers' kinds: one channel each, so one record is one send
    workers = [start_worker(klass, urls, worker_database).start() for klass in CLASSES]
    monitors = {klass: Monitor(urls[klass]) for klass in ("routine", "background")}
    for monitor in monitors.values():
        monitor.start()
        assert monitor.ready.wait(10)
    try:
        outcomes, waits = flood()
        settle(urls)
    finally:
        for monitor in monitors.values():
            monitor.stop()
        for worker in workers:
            worker.stop()
    by_class, duplicated, longest = books(urls, outcomes, waits)
    digest = servers["digest"].admin()
    print(
        f"\ndigest Redis: {json.dumps(by_class)} duplicated={duplicated} longest_wait_ms={json.dumps(longest)} "
        f"digest_redis_commands={digest.info('stats')['total_commands_processed']}"
    )
    for klass, monitor in monitors.items():
        touched = [c for c in monitor.commands if any(mark in c for mark in FOLD_MARKS)]
        assert monitor.commands, f"MONITOR saw nothing on {klass}'s Redis"
        assert not touched, f"{klass}'s Redis saw fold commands, e.g. {touched[:3]}"
    assert refused_on_digest(servers) == []
    balanced(by_class, duplicated, workers)
