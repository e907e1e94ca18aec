"""Flower with a login starts, and asks for it: the refusal without one (test_monitoring.py) runs as Flower starts,
from Flower's own arguments, and lets a login given on its command line through."""

import base64
import sys
import urllib.error
import urllib.request

import pytest

from sluice_tools.processes import ManagedProcess
from sluice_tools.redis_server import free_port


@pytest.mark.parametrize("how", ["option", "environment"])
def test_flower_with_a_login_starts_and_asks_for_it(redis_server, how):
    port = free_port()
    login = ["--basic-auth=ops:correct-horse"] if how == "option" else []
    env = {"REDIS_URL": redis_server.url, "FLOWER_BASIC_AUTH": "" if login else "ops:correct-horse"}
    flower = ManagedProcess(
        "flower",
        [sys.executable, "-m", "celery", "-A", "pipeline", "flower", f"--port={port}", "--address=127.0.0.1", *login],
        env=env,
        ready_text="Visit me at",
    ).start()
    try:
        url = f"http://127.0.0.1:{port}/workers"
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(url, timeout=5)
        refused.value.close()
        assert refused.value.code == 401
        token = base64.b64encode(b"ops:correct-horse").decode()
        request = urllib.request.Request(url, headers={"Authorization": f"Basic {token}"})
        with urllib.request.urlopen(request, timeout=5) as answer:
            assert answer.status == 200
    finally:
        flower.stop()
