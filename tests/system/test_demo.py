"""`manage.py demo --exit` runs the stack end to end and exits 0 once every kind was delivered."""

import subprocess
import sys

import pytest

from sluice_tools.processes import ROOT


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_demo_delivers_one_of_each_kind_and_exits(redis_server, redis_client, tmp_path):
    env = {"PATH": "/usr/bin:/bin", "REDIS_URL": redis_server.url, "DATABASE_URL": f"sqlite:///{tmp_path}/demo.db"}
    env["DJANGO_SECRET_KEY"] = "demo-key-of-this-test-" + "x" * 40  # `make demo` makes a random one
    done = subprocess.run(
        [sys.executable, "manage.py", "demo", "--exit"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=170
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "all 11 deliveries shown" in done.stdout
    assert done.stdout.count("delivered by the critical pool") == 5
    assert "stopped everything the demo started" in done.stdout
    # The replay ran on a database of its own, titled with what it replayed (scale 0.1: 936 events in 4 s).
    assert f"on {redis_server.url.rsplit('/', 1)[0]}/1" in done.stdout
    assert "# Incident replay: 936 events in 4 s" in done.stdout
    assert not redis_client.exists("sluice:bench:sent")
    # The final URLs name the Redis, and a shell on it to paste; the logs outlive the stop.
    assert f"Redis    {redis_server.url}" in done.stdout
    assert f"DJANGO_DEBUG=1 REDIS_URL={redis_server.url} " in done.stdout
    logs = ROOT / ".demo" / "logs"
    assert any(p.name.startswith("worker-critical-") for p in logs.iterdir())
