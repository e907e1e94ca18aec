"""Child processes of the local stack (workers, beat, exporter), for the demo, benchmarks and tests."""

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


class ManagedProcess:
    """A child process logging to a temporary file; start() waits until ``ready_text`` appears."""

    def __init__(self, name, args, env=None, ready_text=None):
        self.name = name
        self.args = args
        self.env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
        self.ready_text = ready_text
        self.log = tempfile.NamedTemporaryFile(prefix=f"sluice-{name}-", suffix=".log", delete=False)
        self.process = None

    def start(self, timeout=60):
        self.process = subprocess.Popen(
            self.args, cwd=ROOT, env=self.env, stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )
        deadline = time.monotonic() + timeout
        while self.ready_text and self.ready_text not in self.output():
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.name} exited early:\n{self.output()}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"{self.name} not ready in {timeout}s:\n{self.output()}")
            time.sleep(0.1)
        return self

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


class WorkerProcess(ManagedProcess):
    """`manage.py worker <klass>` (or plain `celery -A pipeline worker -Q <klass>`) on ``redis_url``."""

    def __init__(self, klass, redis_url, channels=None, extra=(), env=None, plain_celery=False, loglevel="INFO"):
        environment = {"REDIS_URL": redis_url, **(env or {})}
        if channels is not None:
            environment["SLUICE_CHANNELS"] = json.dumps(channels)
        command = (
            ["-m", "celery", "-A", "pipeline", "worker", "-Q", klass]
            if plain_celery
            else ["manage.py", "worker", klass]
        )
        args = [sys.executable, *command, f"--loglevel={loglevel}", "--without-mingle", "--without-gossip", *extra]
        super().__init__(f"worker-{klass}", args, env=environment, ready_text=" ready.")
        self.env.pop("CELERY_BROKER_URL", None)
        self.klass = klass
