"""The Redis servers Sluice talks to: one connection pool per server and process, each class's route to them, and the
Lua in pipeline/lua."""

import contextvars
import functools
import os
import re
import threading
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import NamedTuple

from pipeline.conf import CLASSES, queue_lists, sluice_settings
from pipeline.redis import addresses, cluster
from pipeline.redis.addresses import identity

LUA_DIR = Path(__file__).with_name("lua")


def make_client(url):
    """A redis-py client for ``url``: the one place a client is built (pipeline.redis.addresses: TLS, Sentinel)."""
    return addresses.make_client(url)


class _Client:
    """A client for one URL in one process; replaced whole, never edited."""

    def __init__(self, url):
        self.url = url
        self.key = (url, os.getpid())
        self.redis = make_client(url)


_lock = threading.Lock()
_clients = {}


def get_redis(url=None):
    """The shared client for ``url`` (by default SLUICE_REDIS_URL): safe under threads; a forked child builds
    its own pool, never its parent's sockets."""
    return _client(url).redis


def class_redis(klass, user_id=None):
    """The Redis of a class (SLUICE_QUEUES[klass]["redis_url"]): its queue, admission, overflow, throttles, send
    claims, dead letters and counters, and its folds unless SLUICE_DIGEST["redis_url"] names another Redis. For a
    class on a Redis Cluster, one partition's client (partition_client): ``user_id``'s, else the partition whose
    message this worker handles (in_partition), else the first."""
    queue = sluice_settings().queues[klass]
    if queue.clustered:
        return client_of(queue.every_partition[partition_index(queue, user_id)])
    return _client(queue.redis_url).redis


#: The queue of the partition whose message this thread (or task) handles: see in_partition().
_handling = contextvars.ContextVar("sluice_partition", default=None)


@contextmanager
def in_partition(queue_name):
    """Within the block, a class on a Redis Cluster means the partition whose queue is ``queue_name`` (the queue the
    message being handled came from): its send claim, marks, counters and activity live there, beside its queue."""
    token = _handling.set(queue_name)
    try:
        yield
    finally:
        _handling.reset(token)


def partition_index(queue, user_id=None):
    """Which of ``queue``'s (a clustered QueueConfig's) partitions a call means: ``user_id``'s, else the one being
    handled (in_partition), else the first (where Celery's own publishes to the class go)."""
    if user_id is not None:
        return cluster.partition_of(user_id, queue.partitions)
    return queue.partition_indexes.get(_handling.get(), 0)


_partitions = {}


def partition_client(url, tag):
    """The client of one partition of the cluster at ``url`` (pipeline.redis.cluster.SlotClient): its keys keep the
    partition's tag, and it follows the partition's slot. One per partition and process, like the clients."""
    found = _partitions.get((url, tag))
    cluster_client = _client(url).redis
    if found is None or found.cluster is not cluster_client:
        with _lock:
            found = _partitions.get((url, tag))
            if found is None or found.cluster is not cluster_client:
                found = _partitions[(url, tag)] = cluster.SlotClient(cluster_client, tag)
    return found


def fold_store_url(klass):
    """The URL of the Redis that keeps ``klass``'s folds: SLUICE_DIGEST["redis_url"], else the class's own."""
    conf = sluice_settings()
    return conf.digest.redis_url or conf.queues[klass].redis_url


def folds_elsewhere(klass):
    """Whether ``klass`` folds on a Redis other than its queue's (admission then takes two round trips to fold,
    and a flush hands its digests over from one Redis to the other)."""
    return not same_redis(fold_store_url(klass), sluice_settings().queues[klass].redis_url)


class Route(NamedTuple):
    """Where one class's admission goes, resolved once per settings and process: its queue's config and lists, its
    Redis, and its folds' Redis (the class's own, or SLUICE_DIGEST["redis_url"]'s: then ``elsewhere``)."""

    klass: str
    queue: object  # pipeline.conf.QueueConfig
    lists: tuple  # the queue's list and its priority sub-lists (pipeline.conf.queue_lists)
    client: object
    fold_url: str
    fold_client: object
    elsewhere: bool
    # What admission computes once per kind on this route (its constants), kept with the route so that a change of
    # settings, which builds a new route, never serves a stale one.
    cache: dict


_routes = {}


def route(klass, user_id=None):
    """The Route of ``klass``: built the first time a process asks after its settings changed (sluice_settings()
    hands out a new object then), so the hot path resolves nothing twice; a forked child builds its own. A class on a
    Redis Cluster has a route per partition: ``user_id``'s (partition_index)."""
    conf = sluice_settings()
    whole = conf.queues[klass]
    index = partition_index(whole, user_id) if whole.clustered else 0
    found = _routes.get((klass, index))
    if found is not None and found[0] is conf and found[1] == os.getpid():
        return found[2]
    queue = whole.every_partition[index]
    fold_url = conf.digest.redis_url or queue.redis_url
    client = client_of(queue)
    built = Route(
        klass,
        queue,
        queue_lists(queue.name),
        client,
        fold_url,
        client if fold_url == queue.redis_url else _client(fold_url).redis,
        not same_redis(fold_url, queue.redis_url),
        {},
    )
    _routes[(klass, index)] = (conf, os.getpid(), built)
    return built


def shared_url():
    """The URL of the Redis of what every class shares (the channel gates, the providers' breakers): critical's, so a
    critical send never waits on a Redis that a lower class's flood fills; when critical is on a Redis Cluster,
    SLUICE_REDIS_URL's (one Redis: a gate is one rate for every partition, and on one slot of the cluster it would
    make that slot's primary carry every send's gate)."""
    conf = sluice_settings()
    critical = conf.queues["critical"]
    return conf.redis_url if critical.clustered else critical.redis_url


def shared_redis():
    """The client of shared_url()'s Redis."""
    return _client(shared_url()).redis


def distinct(urls):
    """``urls`` with one URL kept per Redis (same host, port and db), in order."""
    seen, kept = set(), []
    for url in urls:
        if identity(url) not in seen:
            seen.add(identity(url))
            kept.append(url)
    return kept


def every_url():
    """One URL per distinct Redis Sluice uses: SLUICE_REDIS_URL's, each class's, then the digest's (the exporter,
    capacity, the admin and the tools read every one)."""
    conf = sluice_settings()
    digest = [conf.digest.redis_url] if conf.digest.redis_url else []
    return distinct([conf.redis_url, *(conf.queues[klass].redis_url for klass in CLASSES), *digest])


def every_redis():
    """One client per distinct Redis Sluice uses (see every_url), and one per partition of each class on a Redis
    Cluster instead of the cluster's own."""
    found = []
    for url in every_url():
        if not addresses.parse(url).cluster:
            found.append(get_redis(url))
            continue
        queues = sluice_settings().queues
        on_it = [klass for klass in CLASSES if same_redis(queues[klass].redis_url, url)]
        found.extend(client_of(part) for klass in on_it for part in _partitions_of(klass))
    return found


def _by_redis(classes, url_of=None):
    """{URL: those of ``classes`` on that Redis}, one URL per distinct Redis, in the classes' order."""
    groups = {}
    for klass in classes:
        url = url_of(klass) if url_of else sluice_settings().queues[klass].redis_url
        groups.setdefault(identity(url), (url, []))[1].append(klass)
    return dict(groups.values())


def fold_store_classes():
    """{URL: the folding classes whose folds it keeps}: the digest's Redis, or each Redis of routine and
    background."""
    return _by_redis(("routine", "background"), fold_store_url)


def classes_by_redis(client=None):
    """[(client, [classes on it])], one entry per distinct Redis of the classes, and one per partition of a class on
    a Redis Cluster (each partition is a keyspace of its own); all on ``client`` if given."""
    if client is not None:
        return [(client, list(CLASSES))]
    found = []
    for url, classes in _by_redis(CLASSES).items():
        if addresses.parse(url).cluster:
            found.extend((client_of(part), [klass]) for klass in classes for part in _partitions_of(klass))
        else:
            found.append((get_redis(url), classes))
    return found


def users_by_redis(user_ids, client=None):
    """[(client, [user ids])]: where each user's mirrored state goes (the preferences), one entry per distinct Redis
    of the classes with every user, and on a Redis Cluster one per partition with its own users; all on ``client`` if
    given."""
    user_ids = list(user_ids)
    if client is not None:
        return [(client, user_ids)]
    found = []
    for url, classes in _by_redis(CLASSES).items():
        if not addresses.parse(url).cluster:
            found.append((get_redis(url), user_ids))
            continue
        for klass in classes:
            queue = sluice_settings().queues[klass]
            groups = {}
            for user_id in user_ids:
                groups.setdefault(cluster.partition_of(user_id, queue.partitions), []).append(user_id)
            found.extend((client_of(queue.every_partition[index]), users) for index, users in groups.items())
    return found


def client_of(queue):
    """The client of a QueueConfig's Redis: its partition's for a partition of a class on a Redis Cluster."""
    return partition_client(queue.redis_url, queue.tag) if queue.tag else _client(queue.redis_url).redis


def partition_clients(queue_name):
    """[(partition index, client)] of the class on a Redis Cluster whose queue is ``queue_name``; [] for any other
    queue (the exporter reads such a class partition by partition)."""
    for queue in sluice_settings().queues.values():
        if queue.name == queue_name and queue.clustered:
            return [(index, client_of(part)) for index, part in enumerate(queue.every_partition)]
    return []


def _partitions_of(klass):
    return sluice_settings().queues[klass].every_partition


@functools.lru_cache(maxsize=64)
def same_redis(a, b):
    """Whether two URLs name the same Redis database (cached: admission asks on every event it folds)."""
    return identity(a) == identity(b)


def _client(url=None):
    url = url or sluice_settings().redis_url
    # By URL, not by identity: two spellings of one Redis may differ in what the client is built with (a
    # password, a CA bundle), and a changed setting must never keep using the client of the old one.
    key = (url, os.getpid())
    current = _clients.get(key[0])
    if current is not None and current.key == key:
        return current
    with _lock:
        current = _clients.get(key[0])
        if current is None or current.key != key:
            current = _clients[key[0]] = _Client(url)
        return current


def reset():
    """Forget this process's clients and routes (tests; a settings change picks new ones up by itself)."""
    # Dropped, not closed: a caller may still hold one of them, and its pool reconnects on its next use.
    with _lock:
        _clients.clear()
        _routes.clear()
        _partitions.clear()


INCLUDE = re.compile(r"^--! include (\w+)$", re.M)
DEFINE = re.compile(r"^--! define (\w+)$", re.M)


@cache
def lua_source(path, defines=()):
    """A script's text, with each ``--! include <name>`` line replaced by include/<name>.lua beside the script
    (a package's own shared Lua), else by pipeline/lua/include/<name>.lua; and each ``--! define <name>`` line by
    the Lua text ``defines`` (pairs of name and text) gives it: what its owner in Python writes for it, such as a
    wire's field names."""
    path = Path(path)
    text = path.read_text()
    given = dict(defines)

    def included(found):
        own = path.parent / "include" / f"{found[1]}.lua"
        return (own if own.exists() else LUA_DIR / "include" / f"{found[1]}.lua").read_text().strip()

    def defined(found):
        if found[1] not in given:
            raise LookupError(f"{path.name}: nothing defines {found[1]!r}")
        return given[found[1]]

    return DEFINE.sub(defined, INCLUDE.sub(included, text))


class Scripts:
    """The Lua scripts of one folder, each registered once per client (EVALSHA, then EVAL after a restart).

    ``defines`` (a function, called when the first script is built: import does nothing) gives the Lua text of each
    ``--! define`` line of the folder's scripts."""

    def __init__(self, folder, defines=None):
        self.folder = Path(folder)
        self.defines = defines
        self._built = {}

    def path(self, name):
        return self.folder / f"{name}.lua"

    def get(self, name):
        """The redis-py Script ``name``, built once per process; it runs on the client it is handed (EVALSHA, loading
        it first if that Redis lacks it)."""
        found = self._built.get(name)
        if found is None:
            defines = tuple(sorted(self.defines().items())) if self.defines else ()
            # Built twice by two threads at once is harmless: both objects run the same script.
            found = self._built.setdefault(name, _client().redis.register_script(lua_source(self.path(name), defines)))
        return found

    def __call__(self, name, on=None):
        """The script ``name``, run on the client ``on`` (by default SLUICE_REDIS_URL's, as it is now)."""
        return functools.partial(self.get(name), client=on or _client().redis)


#: The engine's own scripts, in pipeline/lua.
script = Scripts(LUA_DIR)


def _after_fork_in_child():
    # A lock held by another thread at fork time would never be released in the child; the parent's clients
    # are left to the GC, never closed here: their sockets are the parent's.
    global _lock, _clients, _routes, _partitions
    _lock = threading.Lock()
    _clients = {}
    _routes = {}
    _partitions = {}


os.register_at_fork(after_in_child=_after_fork_in_child)
