"""Child processes of the local stack (workers, beat, exporter), for the demo, benchmarks and tests.

Every child logs to a file that outlives it (SLUICE_LOG_DIR, or a folder in the temporary directory), so
what a worker said is there to read after it stopped, and problems() picks out what went wrong in it.
"""

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# What a worker says when something went wrong: a log record at ERROR or CRITICAL (Celery's and Django's
# formats), a task that raised, or a worker that died of an error it could not recover from.
PROBLEM = re.compile(r"(\bERROR\b|\bCRITICAL\b|raised unexpected|Unrecoverable error)")


def log_dir():
    """The folder child processes log to: SLUICE_LOG_DIR, or sluice-logs in the temporary directory."""
    folder = Path(os.environ.get("SLUICE_LOG_DIR") or Path(tempfile.gettempdir()) / "sluice-logs")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


class ManagedProcess:
    """A child process logging to a file; start() waits until ``ready_text`` appears in it."""

    #: Every process started in this interpreter, in order (tests read their logs when they end).
    started = []
    #: Start in a session (and process group) of its own, so os.killpg() reaches it and all its children.
    new_session = False

    def __init__(self, name, args, env=None, ready_text=None):
        self.name = name
        self.args = args
        self.env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
        self.ready_text = ready_text
        self.cwd = ROOT
        self.log_path = log_dir() / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}-{id(self):x}.log"
        self.process = None

    def start(self, timeout=60):
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                self.args,
                cwd=self.cwd,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=self.new_session,
            )
        ManagedProcess.started.append(self)
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
        """Everything the process has logged so far."""
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def problems(self, expected=()):
        """The lines of the log that say something went wrong, except those matching an ``expected`` regex."""
        allowed = [re.compile(pattern) for pattern in expected]
        return [
            line
            for line in self.output().splitlines()
            if PROBLEM.search(line) and not any(pattern.search(line) for pattern in allowed)
        ]

    def stop(self, timeout=15):
        """SIGTERM, then SIGKILL after ``timeout`` seconds; the log stays."""
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


class WorkerProcess(ManagedProcess):
    """`manage.py worker <klass>` (or plain `celery -A pipeline worker -Q <klass>`) on ``redis_url``; with
    ``fetch_hook`` (a dotted path), that function is called between each fetch and its record
    (sluice_tools.fetch_hook)."""

    def __init__(
        self, klass, redis_url, channels=None, extra=(), env=None, plain_celery=False, loglevel="INFO", fetch_hook=None
    ):
        environment = {"REDIS_URL": redis_url, **(env or {})}
        if channels is not None:
            environment["SLUICE_CHANNELS"] = json.dumps(channels)
        command = (
            ["-m", "celery", "-A", "pipeline", "worker", "-Q", klass]
            if plain_celery
            else ["manage.py", "worker", klass]
        )
        if fetch_hook:
            command = ["-m", "sluice_tools.fetch_hook", fetch_hook, *command]
        args = [sys.executable, *command, f"--loglevel={loglevel}", "--without-mingle", "--without-gossip", *extra]
        super().__init__(f"worker-{klass}", args, env=environment, ready_text=" ready.")
        self.env.pop("CELERY_BROKER_URL", None)
        self.klass = klass
