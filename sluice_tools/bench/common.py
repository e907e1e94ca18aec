"""What every benchmark shares: a Redis to run against, percentiles, and writing the JSON report."""

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path

from django.conf import settings

from sluice_tools.processes import ROOT
from sluice_tools.redis_server import RedisServer


@contextlib.contextmanager
def bench_redis(stdout):
    """Use a private redis-server (so a benchmark never flushes a Redis it does not own), or
    SLUICE_BENCH_REDIS_URL when given; point Django and Celery at it for the run."""
    from sluice_tools.redis_target import use_redis

    server = None
    url = os.environ.get("SLUICE_BENCH_REDIS_URL")
    if not url:
        server = RedisServer().start()
        url = server.url
    stdout.write(f"benchmark Redis: {url}")
    previous = settings.SLUICE_REDIS_URL
    use_redis(url)
    try:
        yield url
    finally:
        use_redis(previous)
        if server:
            server.stop()


def percentile(values, q):
    """The q-th percentile (0-100) by nearest rank; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, round(q / 100 * len(ordered) + 0.5) - 1))
    return ordered[rank]


def write_json(path, data):
    """Write ``data`` as indented JSON to ``path`` (creating its folder)."""
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


def fresh_database(directory):
    """A migrated SQLite database in ``directory`` for a bench's workers: the flush rebuilds the preferences
    mirror from the workers' database, so whatever users and choices the project's own database holds (the demo's,
    another bench's) must not change the run."""
    url = f"sqlite:///{directory}/bench.sqlite3"
    env = {**os.environ, "DATABASE_URL": url}
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True, timeout=300)
    return url
