"""Redis URLs: parse one (redis, rediss, unix, sentinel, redis+cluster, rediss+cluster), build its client, and say it
without its password."""

import re
import ssl
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, quote, unquote, urlsplit

import redis
from django.core.exceptions import ImproperlyConfigured
from redis.backoff import NoBackoff
from redis.retry import Retry
from redis.sentinel import Sentinel

from pipeline.redis.keys import PREFIX
from pipeline.redis.sentinel import FollowingSentinelPool

SCHEMES = ("redis", "rediss", "unix", "sentinel", "redis+cluster", "rediss+cluster")
#: A Redis Cluster's schemes: its seed nodes, comma separated (redis+cluster://h1:7000,h2:7000,h3:7000).
CLUSTER_SCHEMES = ("redis+cluster", "rediss+cluster")
DEFAULT_PORTS = {"redis": 6379, "rediss": 6379, "sentinel": 26379, "redis+cluster": 6379, "rediss+cluster": 6379}
# The query parameters each scheme takes; anything else is refused rather than ignored, because kombu refuses
# it too (a worker would then die at start while notify() worked).
SSL_OPTIONS = ("ssl_ca_certs", "ssl_cert_reqs", "ssl_certfile", "ssl_keyfile", "ssl_check_hostname")
SENTINEL_OPTIONS = ("master_name", "sentinel_username", "sentinel_password")
QUERY = {
    "redis": (),
    "rediss": SSL_OPTIONS,
    "unix": ("db",),
    "sentinel": SENTINEL_OPTIONS,
    "redis+cluster": (),
    "rediss+cluster": SSL_OPTIONS,
}
KINDS = "a redis://, rediss://, unix://, sentinel://, redis+cluster:// or rediss+cluster:// URL"
CERT_REQS = {"required": ssl.CERT_REQUIRED, "optional": ssl.CERT_OPTIONAL, "none": ssl.CERT_NONE}
#: The timeouts every client gets unless the caller says otherwise: a caller never waits on a dead server for
#: longer than a connect plus a read, and a pooled connection idle for 30 s is checked before it is used.
TIMEOUTS = {"socket_connect_timeout": 2, "socket_timeout": 5, "health_check_interval": 30}
MASK = "***"


@dataclass(frozen=True)
class RedisURL:
    """One parsed Redis URL; ``hosts`` holds the server, or every sentinel of a sentinel:// URL."""

    scheme: str
    hosts: tuple = ()
    path: str = ""
    db: int = 0
    username: str | None = None
    password: str | None = None
    options: dict = field(default_factory=dict)

    @property
    def master_name(self):
        return self.options.get("master_name")

    @property
    def cluster(self):
        """Whether this URL names a Redis Cluster (its hosts are seed nodes)."""
        return self.scheme in CLUSTER_SCHEMES

    @property
    def tls(self):
        return self.scheme in ("rediss", "rediss+cluster")


def _fail(setting, url, problem):
    raise ImproperlyConfigured(f"{setting} {problem} (got {describe_unchecked(url)!r})")


def parse(url, setting="SLUICE_REDIS_URL"):
    """``url`` parsed; ImproperlyConfigured naming ``setting`` and the problem when it is not a usable URL."""
    if not isinstance(url, str) or "://" not in url:
        raise ImproperlyConfigured(f"{setting} must be {KINDS}, got {url!r}")
    scheme = url.split("://", 1)[0].lower()
    if scheme not in SCHEMES:
        _fail(setting, url, f"must be {KINDS}")
    segments = url.split(";") if scheme == "sentinel" else [url]
    if scheme in CLUSTER_SCHEMES:
        segments = _cluster_segments(url, setting)
    hosts, options, db, username, password = [], {}, None, None, None
    for segment in segments:
        try:
            parts = urlsplit(segment.strip())
            port = parts.port
        except ValueError:
            # Not the parser's own message: it quotes the part it could not read, which may be a piece of the password.
            _fail(setting, url, "is not a valid URL (percent-encode a '/', '?', '#' or '@' in the password)")
        if parts.scheme.lower() != scheme:
            _fail(setting, url, f"mixes schemes: every part of a {scheme}:// URL must be {scheme}://")
        for key, value in parse_qsl(parts.query, keep_blank_values=True):
            if key not in QUERY[scheme]:
                allowed = ", ".join(QUERY[scheme]) or "none"
                _fail(setting, url, f"has an unknown option {key!r} for {scheme}:// (allowed: {allowed})")
            if options.setdefault(key, value) != value:
                _fail(setting, url, f"gives {key!r} twice with different values")
        if parts.username is not None or parts.password is not None:
            found = (unquote(parts.username or "") or None, unquote(parts.password or "") or None)
            if username is None and password is None:
                username, password = found
            elif found != (username, password):
                _fail(setting, url, "gives different credentials to different sentinels")
        path = parts.path
        if scheme == "unix":
            if not path:
                _fail(setting, url, "needs the socket's path, as in unix:///run/redis.sock?db=0")
            hosts.append(path)
            path_db = options.get("db")
        else:
            if not parts.hostname:
                _fail(setting, url, "needs a host")
            hosts.append((parts.hostname.lower(), port or DEFAULT_PORTS[scheme]))
            # A sentinel:// URL may name the database on any one part (kombu's examples put it on the last).
            path_db = path.strip("/") or None
        if path_db is None:
            continue
        if not path_db.isdigit():
            # Not quoted: after a password with an unencoded "/", the "path" is the rest of the password.
            _fail(setting, url, "has a database number that is not a number (percent-encode a '/' in the password)")
        if db is not None and int(path_db) != db:
            _fail(setting, url, "names different databases in different parts")
        db = int(path_db)
    if scheme in CLUSTER_SCHEMES and db:
        _fail(setting, url, "names a database: a Redis Cluster has only database 0")
    if scheme == "sentinel" and not options.get("master_name"):
        _fail(
            setting, url, "needs the master's name: sentinel://host:26379;sentinel://host2:26379/0?master_name=mymaster"
        )
    reqs = options.get("ssl_cert_reqs")
    if reqs is not None:
        # kombu also takes Python's spelling, CERT_REQUIRED.
        spelled = reqs.lower().removeprefix("cert_")
        if spelled not in CERT_REQS:
            _fail(setting, url, f"has ssl_cert_reqs={reqs!r}: use required (the default), optional or none")
        options["ssl_cert_reqs"] = spelled
    check = options.get("ssl_check_hostname")
    if check is not None and check.lower() not in ("true", "false"):
        _fail(setting, url, f"has ssl_check_hostname={check!r}: use true (the default) or false")
    options.pop("db", None)
    return RedisURL(
        scheme=scheme,
        hosts=tuple(hosts) if scheme != "unix" else (),
        path=hosts[0] if scheme == "unix" else "",
        db=db or 0,
        username=username,
        password=password,
        options=options,
    )


def _cluster_segments(url, setting):
    """A cluster URL as one URL per seed node, each with the credentials, the path and the query: a URL parser reads
    one host and port, and the seeds are comma separated in the netloc."""
    scheme, _, rest = url.partition("://")
    end = min((i for i in (rest.find("/"), rest.find("?")) if i >= 0), default=len(rest))
    netloc, tail = rest[:end], rest[end:]
    userinfo, at, hosts = netloc.rpartition("@")
    seeds = [host.strip() for host in hosts.split(",")]
    if not all(seeds):
        _fail(setting, url, "has an empty seed node: name them as host:port,host:port")
    return [f"{scheme}://{userinfo}{at}{host}{tail}" for host in seeds]


def ssl_options(parsed):
    """The TLS options of a rediss:// URL, as redis-py's and kombu's ``ssl_*`` keywords; verification is on unless
    the URL turns it off (kombu alone would connect to a rediss:// URL without checking the certificate)."""
    options = parsed.options
    found = {"ssl_cert_reqs": CERT_REQS[options.get("ssl_cert_reqs", "required")]}
    for key in ("ssl_ca_certs", "ssl_certfile", "ssl_keyfile"):
        if options.get(key):
            found[key] = options[key]
    if "ssl_check_hostname" in options:
        found["ssl_check_hostname"] = options["ssl_check_hostname"].lower() == "true"
    return found


def make_client(url, **timeouts):
    """A redis-py client for ``url``: TCP, TLS (certificate verified), a Unix socket, or the current master of
    a Sentinel group (it asks the sentinels again after a connection error, and at most every second when it
    takes a pooled connection: pipeline/redis/sentinel.py; so it follows a failover).
    ``timeouts`` override TIMEOUTS (socket_connect_timeout, socket_timeout, health_check_interval)."""
    parsed = parse(url)
    # No retries inside the client (what Redis.from_url gives): redis.Redis(host=...) would retry a failed
    # command ten times with a backoff of up to ten seconds, and a producer would hang through an outage instead
    # of getting Unavailable at once. Workers and callers retry on their own terms.
    options = {**TIMEOUTS, "retry": Retry(NoBackoff(), 0), **timeouts}
    auth = {"username": parsed.username, "password": parsed.password, "db": parsed.db}
    if parsed.scheme == "unix":
        options.pop("socket_connect_timeout", None)
        return redis.Redis(unix_socket_path=parsed.path, **auth, **options)
    if parsed.scheme == "sentinel":
        return sentinel(parsed, options).master_for(
            parsed.master_name, redis.Redis, connection_pool_class=FollowingSentinelPool, **auth, **options
        )
    if parsed.tls:
        options = {**options, "ssl": True, **ssl_options(parsed)}
    if parsed.cluster:
        from pipeline.redis.cluster import make_cluster

        return make_cluster(parsed, auth, options)
    host, port = parsed.hosts[0]
    return redis.Redis(host=host, port=port, **auth, **options)


def sentinel(parsed, options):
    """redis-py's Sentinel for a parsed sentinel:// URL; the sentinels get the same timeouts as the master."""
    sentinel_kwargs = {k: v for k, v in options.items() if k.startswith("socket_") or k == "retry"}
    if parsed.options.get("sentinel_password"):
        sentinel_kwargs["password"] = parsed.options["sentinel_password"]
        sentinel_kwargs["username"] = parsed.options.get("sentinel_username") or None
    return Sentinel(list(parsed.hosts), sentinel_kwargs=sentinel_kwargs, **options)


def describe(url):
    """``url`` fit for logs and errors: its password (and a sentinel password) replaced by ***."""
    parse(url)
    return describe_unchecked(url)


def describe_unchecked(url):
    """describe() for a URL that may be malformed (an error message about it)."""
    if not isinstance(url, str) or "://" not in url:
        return url
    return ";".join(_describe_segment(segment) for segment in url.split(";"))


SECRET_OPTION = re.compile(r"([?&;]sentinel_password=)[^&;#]*")


def _describe_segment(segment):
    scheme, sep, rest = segment.partition("://")
    if sep and "@" in rest:
        # Everything before the last "@" is the user and password, even a password with an unencoded "/", "?" or
        # "#" in it (which a URL parser reads as the start of the path, and would print whole).
        userinfo, _, host = rest.rpartition("@")
        user, colon, _password = userinfo.partition(":")
        rest = f"{user}:{MASK}@{host}" if colon else rest
    return SECRET_OPTION.sub(rf"\g<1>{MASK}", scheme + sep + rest)


def identity(url):
    """What makes two URLs the same server: ("tcp", host, port, db), ("unix", path, db) or
    ("sentinel", sentinels, master name, db). redis:// and rediss:// to one host and port are the same server. A
    master name is unique only among the sentinels that watch it ("mymaster" is everyone's default), so the
    sentinels are part of a Sentinel URL's identity."""
    parsed = parse(url)
    if parsed.scheme == "unix":
        return ("unix", parsed.path, parsed.db)
    if parsed.scheme == "sentinel":
        return ("sentinel", tuple(sorted(parsed.hosts)), parsed.master_name, parsed.db)
    if parsed.cluster:
        # A cluster is known by its seeds: the same seeds, the same cluster.
        return ("cluster", tuple(sorted(parsed.hosts)))
    host, port = parsed.hosts[0]
    return ("tcp", host, port, parsed.db)


def celery_broker(url):
    """The Celery settings that make Sluice's app use ``url`` as its broker: the URL in kombu's spelling, the
    transport (Sluice's reliable fetch, over Sentinel for sentinel://), its options and TLS."""
    parsed = parse(url)
    found = {"broker_transport_options": {}, "broker_use_ssl": False}
    if parsed.scheme == "sentinel":
        credentials = ""
        if parsed.username or parsed.password:
            user = quote(parsed.username or "", safe="")
            credentials = f"{user}:{quote(parsed.password or '', safe='')}@"
        # Every part carries the credentials and the database: kombu reads them from whichever sentinel it
        # switched to.
        found["broker_url"] = ";".join(f"sentinel://{credentials}{h}:{p}/{parsed.db}" for h, p in parsed.hosts)
        found["broker_transport"] = "pipeline.broker.transport:SentinelTransport"
        options = {"master_name": parsed.master_name}
        if parsed.options.get("sentinel_password"):
            options["sentinel_kwargs"] = {
                "password": parsed.options["sentinel_password"],
                "username": parsed.options.get("sentinel_username") or None,
            }
        found["broker_transport_options"] = options
        return found
    if parsed.cluster:
        # kombu reads the credentials from a redis:// URL of the first seed; the transport finds the cluster by its
        # seeds among SLUICE_QUEUES (pipeline.broker.cluster_transport), so no secret sits in the transport options.
        credentials = ""
        if parsed.username or parsed.password:
            credentials = f"{quote(parsed.username or '', safe='')}:{quote(parsed.password or '', safe='')}@"
        host, port = parsed.hosts[0]
        found["broker_url"] = f"{'rediss' if parsed.tls else 'redis'}://{credentials}{host}:{port}/0"
        found["broker_transport"] = "pipeline.broker.cluster_transport:ClusterTransport"
        found["broker_transport_options"] = {"cluster_seeds": [f"{h}:{p}" for h, p in parsed.hosts]}
    else:
        found["broker_transport"] = "pipeline.broker.transport:Transport"
        found["broker_url"] = url.split("?", 1)[0] if parsed.scheme == "rediss" else url
    if parsed.tls:
        found["broker_use_ssl"] = ssl_options(parsed)
    return found


def acl_rules(queue_names, db=0, cluster=False):
    """The rules of a Redis ACL user for Sluice, after ``user <name> on >password``: its keys (Sluice's, kombu's,
    the queues ``queue_names`` and their priority lists), the pub/sub channels of Celery's events and broadcast
    commands in database ``db``, and only ACL_COMMANDS. On a Redis Cluster (``cluster``), also every key of each
    class's partitions (they start with the partition's hash tag, "{<queue>.") and kombu's exchange tables."""
    keys = [f"~{PREFIX}:*", "~_kombu.*", "~unacked*", "~*.reply.celery.pidbox", *(f"~{name}*" for name in queue_names)]
    commands = ACL_COMMANDS
    if cluster:
        keys += ["~{sluice.bindings}*", *(f"~{{{name}.*" for name in queue_names)]
        commands += CLUSTER_COMMANDS
    channels = [f"&/{db}.celery.pidbox", f"&/{db}.celeryev/*"]
    return " ".join([*keys, "resetchannels", *channels, "-@all", *(f"+{command}" for command in commands)])


#: The commands Sluice runs (notify(), folds, flushes, the gate, the exporter, workers and Celery's events),
#: for a Redis ACL user: ``user sluice on >password ~* &* -@all +<each>`` (docs/redis.md).
ACL_COMMANDS = (
    # Connecting: HELLO (redis-py's handshake), SELECT (a database other than 0), PING (health checks).
    "hello", "select", "ping",
    # Lua (every read-modify-write), and the transactions of redis-py's pipelines and kombu's acks.
    "eval", "evalsha", "script|load", "script|exists", "multi", "exec",
    # kombu's restore of an unacked message (a worker's stop, a requeue) and its restore lock: WATCH, then a
    # transaction; redis-py ends a watching pipeline with UNWATCH.
    "watch", "unwatch",
    # A class with durability "replicated": WAIT for its replicas after each write it confirms (pipeline/durability.py).
    "wait",
    # Keys and strings: heartbeats, the gate's holds, digest claims, kombu's restore lock.
    "del", "exists", "expire", "expireat", "pexpire", "pttl", "get", "set", "rename", "time",
    # Hashes: counters, breakers, kombu's unacked record, fold store entries, the topic fan-outs' backlog.
    "hdel", "hexists", "hget", "hgetall", "hincrby", "hincrbyfloat", "hkeys", "hlen", "hmget", "hset", "hsetnx",
    "hstrlen", "hvals",
    # Lists: the queues, the reliable fetch (BLMOVE into a processing list), depth and the oldest message.
    "blmove", "lindex", "llen", "lmove", "lpop", "lpush", "lrange", "lrem", "rpop", "rpush",
    # Sets: kombu's bindings, the fetch consumers' registry (SSCAN walks it, SPOP takes a dead one's tags), claims.
    "sadd", "scard", "smembers", "spop", "srem", "sscan",
    # Sorted sets: pending digests, claims, dead letters, latency samples, kombu's unacked index.
    "zadd", "zcard", "zcount", "zpopmin", "zrange", "zrangebyscore", "zrem", "zremrangebyscore", "zrevrangebyscore",
    "zscore",
    # Streams: the activity log's buffer (XADD in admission's and a send's step, the drain's XRANGE and XTRIM, the
    # exporter's XLEN and XINFO STREAM for the dropped count).
    "xadd", "xinfo|stream", "xlen", "xrange", "xtrim",
    # Celery's events and broadcast commands (kombu's fanout over pub/sub patterns).
    "publish", "psubscribe", "punsubscribe",
)  # fmt: skip

#: What a client of a Redis Cluster runs besides ACL_COMMANDS: reading the cluster's map of slots (at start, and again
#: after MOVED or a lost connection: pipeline.redis.cluster.SlotClient), and COMMAND, which redis-py's cluster client
#: reads once to find each command's keys.
CLUSTER_COMMANDS = ("cluster|slots", "command")
