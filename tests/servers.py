"""Worker subprocesses for tests: `manage.py worker <class>` against the test's private Redis."""

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


class WorkerProcess:
    """One `python manage.py worker <klass>` child; waits until Celery says it is ready."""

    def __init__(self, klass, redis_url, channels=None, extra=(), env=None):
        self.klass = klass
        self.log = tempfile.NamedTemporaryFile(prefix=f"sluice-worker-{klass}-", suffix=".log", delete=False)
        environment = {**os.environ, "REDIS_URL": redis_url, "PYTHONUNBUFFERED": "1", **(env or {})}
        environment.pop("CELERY_BROKER_URL", None)
        if channels is not None:
            environment["SLUICE_CHANNELS"] = json.dumps(channels)
        self.args = [sys.executable, "manage.py", "worker", klass, "--loglevel=INFO", "--without-mingle",
                     "--without-gossip", *extra]
        self.env = environment
        self.process = None

    def start(self, timeout=60):
        self.process = subprocess.Popen(self.args, cwd=ROOT, env=self.env, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.klass} worker exited early:\n{self.output()}")
            if " ready." in self.output():
                return self
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"{self.klass} worker not ready in {timeout}s:\n{self.output()}")

    def output(self):
        return Path(self.log.name).read_text(errors="replace")

    def stop(self, timeout=15):
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()
        Path(self.log.name).unlink(missing_ok=True)
