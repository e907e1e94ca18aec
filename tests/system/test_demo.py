"""`manage.py demo --exit` runs the stack end to end and exits 0 once every kind was delivered."""

import os
import signal
import subprocess
import sys

import pytest

from sluice_tools.processes import ROOT


def run_in_own_group(args, env, timeout):
    """subprocess.run() in a process group of its own: a demo that times out is killed with every worker and the
    beat it started, so none of them outlives the test and keeps publishing to the next test's Redis."""
    with subprocess.Popen(
        args, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    ) as process:
        try:
            stdout, stderr = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            stdout, stderr = process.communicate()
            pytest.fail(f"the demo did not exit within {timeout} s:\n{stdout}{stderr}")
    return subprocess.CompletedProcess(args, process.returncode, stdout, stderr)


# Three incident replays of about 40 s each, a Flower per Redis and the inbox's events: about 130-170 s on two
# loaded cores, so the demo gets 300 s before it counts as hung.
@pytest.mark.timeout(320)
def test_demo_delivers_one_of_each_kind_and_exits(redis_server, redis_client, tmp_path):
    env = {"PATH": "/usr/bin:/bin", "REDIS_URL": redis_server.url, "DATABASE_URL": f"sqlite:///{tmp_path}/demo.db"}
    env["DJANGO_SECRET_KEY"] = "demo-key-of-this-test-" + "x" * 40  # `make demo` makes a random one
    done = run_in_own_group([sys.executable, "manage.py", "demo", "--exit"], env, timeout=300)
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


@pytest.mark.timeout(200)
def test_the_demo_on_a_redis_cluster_puts_critical_there(redis_server, redis_client, tmp_path):
    from sluice_tools.redis_cluster import cluster_support
    from tests.conftest import need

    reason = cluster_support()
    if reason:
        need(reason)
    env = {"PATH": "/usr/bin:/bin", "REDIS_URL": redis_server.url, "DATABASE_URL": f"sqlite:///{tmp_path}/demo.db"}
    env["DJANGO_SECRET_KEY"] = "demo-key-of-this-test-" + "x" * 40
    done = run_in_own_group([sys.executable, "manage.py", "demo", "--exit", "--scale", "0", "--cluster"], env, 180)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "started a Redis Cluster of 3 primaries and 3 replicas" in done.stdout
    assert "all 11 deliveries shown" in done.stdout
    assert done.stdout.count("delivered by the critical pool") == 5
    assert "critical redis+cluster://127.0.0.1:" in done.stdout
    logs = ROOT / ".demo" / "logs"
    newest = max((p for p in logs.iterdir() if p.name.startswith("worker-critical-")), key=lambda p: p.stat().st_mtime)
    assert "ClusterTransport" in newest.read_text()
