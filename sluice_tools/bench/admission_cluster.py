"""bench admission --cluster: a critical notify() on one Redis against on a Redis Cluster of 3 primaries, in one run.

The bench starts the cluster (sluice_tools.redis_cluster); its own Redis (SLUICE_REDIS_URL) is the one Redis. The
two placements alternate in chunks of calls (SLUICE_QUEUES["critical"] without and with a "redis+cluster://" URL),
so that a neighbour's load on this machine falls on both alike. Round trips are counted twice: client side (each
packet this process sends, a pipeline is one) and server side (INFO commandstats, summed over the primaries).
"""

import statistics
import time

from django.contrib.auth import get_user_model
from django.test import override_settings

from notifications import Outcome, notify
from pipeline.conf import CLASSES, queue_lists, sluice_settings
from pipeline.connections import client_of, get_redis
from pipeline.redis.cluster import partition_of
from sluice_tools.bench.admission_bench import CHUNK, PAYLOAD, RoundTrips
from sluice_tools.redis_cluster import RedisCluster, cluster_support

from .common import percentile
from .cost import CHANNELS, KINDS
from .meter import commandstats

KIND = "cost.critical"
# A control beside them: the cluster with only the users whose partitions one primary holds. The same code as on
# the cluster, one server process: what the spread over processes (on this machine's cores) costs, apart.
PATHS = ("one_redis", "cluster", "cluster_one_primary")
PARTITIONS = 12
# Many users, so that each partition (CRC-32 of the user id) takes about its share of the calls.
USERS = 1200
# Commands the bench itself sends to a node to read it, never notify()'s.
OWN = {"info", "config|resetstat", "config"}


def start_cluster(replicas=1):
    """A started RedisCluster of 3 primaries (``replicas`` each), or RuntimeError saying why this machine has none."""
    reason = cluster_support()
    if reason:
        raise RuntimeError(f"no Redis Cluster on this machine: {reason}")
    return RedisCluster(replicas_per_primary=replicas).start()


def cluster_queues(cluster_url, capacity, partitions=PARTITIONS):
    """SLUICE_QUEUES: critical on the cluster in ``partitions`` partitions, the other classes on the bench's Redis."""
    queues = {klass: {"capacity": capacity} for klass in CLASSES}
    queues["critical"] = {"capacity": capacity, "redis_url": cluster_url, "partitions": partitions}
    return queues


def clear_critical():
    """Empty critical's queue lists, in every partition when it is on a cluster (the settings in force say)."""
    whole = sluice_settings().queues["critical"]
    for part in whole.every_partition:
        client_of(part).delete(*queue_lists(part.name))


def node_commands(clients):
    """{command: calls} summed over ``clients`` (INFO commandstats), the bench's own reads left out."""
    total = {}
    for client in clients:
        for name, calls in commandstats(client).items():
            if name not in OWN:
                total[name] = total.get(name, 0) + calls
    return total


def difference(after, before, calls):
    return {
        name: round((value - before.get(name, 0)) / calls, 3)
        for name, value in sorted(after.items())
        if value != before.get(name, 0)
    }


def run(calls=3000, rounds=3, progress=None, replicas=1):
    cluster = start_cluster(replicas)
    try:
        return measure(cluster, calls, rounds, progress, replicas)
    finally:
        cluster.stop()


def measure(cluster, calls, rounds, progress, replicas=1):
    """The interleaved rounds of run()."""
    every_user = [get_user_model()(pk=n) for n in range(1, USERS + 1)]
    plain = get_redis()
    primaries = [node.admin() for node in cluster.primaries()]
    # Room for every call of a round in any one partition (the control's users fill a third of them): the accepted
    # path, the one a request takes normally.
    capacity = calls * PARTITIONS
    settings_of = {
        "one_redis": {klass: {"capacity": capacity} for klass in CLASSES},
        "cluster": cluster_queues(cluster.url, capacity),
    }
    settings_of["cluster_one_primary"] = settings_of["cluster"]
    users_of = {
        "one_redis": every_user,
        "cluster": every_user,
        "cluster_one_primary": users_on(cluster, every_user, settings_of["cluster"]),
    }
    rates = {path: [] for path in PATHS}
    cpu_us = {path: [] for path in PATHS}
    latencies = {path: [] for path in PATHS}
    trips = dict.fromkeys(PATHS, 0)
    commands = {}
    with override_settings(SLUICE_KINDS=KINDS, SLUICE_CHANNELS=CHANNELS):
        for path in PATHS:
            with override_settings(SLUICE_QUEUES=settings_of[path]):
                for user in users_of[path][:200]:  # every primary has the script loaded, every client connected
                    notify(user, KIND, entity_id="warm-up", payload=PAYLOAD)
                clear_critical()
        counted = min(calls, 1000)
        for path in PATHS[:2]:
            users = users_of[path]
            with override_settings(SLUICE_QUEUES=settings_of[path]):
                before_plain, before_nodes = node_commands([plain]), node_commands(primaries)
                for i in range(counted):
                    notify(users[i % len(users)], KIND, entity_id=f"count{i}", payload=PAYLOAD)
                commands[path] = {
                    "plain": difference(node_commands([plain]), before_plain, counted),
                    "primaries": difference(node_commands(primaries), before_nodes, counted),
                }
                clear_critical()
        for round_no in range(rounds):
            wall, cpu = dict.fromkeys(PATHS, 0.0), dict.fromkeys(PATHS, 0.0)
            for first in range(0, calls, CHUNK):
                # The order alternates chunk by chunk: neither placement always runs right after the other.
                order = PATHS if (first // CHUNK) % 2 == 0 else tuple(reversed(PATHS))
                for path in order:
                    users = users_of[path]
                    with override_settings(SLUICE_QUEUES=settings_of[path]), RoundTrips() as sent:
                        started, started_cpu = time.perf_counter(), time.process_time()
                        for i in range(first, min(first + CHUNK, calls)):
                            t = time.perf_counter()
                            outcome = notify(users[i % len(users)], KIND, entity_id=f"r{round_no}-{i}", payload=PAYLOAD)
                            latencies[path].append(time.perf_counter() - t)
                            if outcome != Outcome.ACCEPTED:
                                raise RuntimeError(f"bench admission --cluster: a call was {outcome}, not accepted")
                        wall[path] += time.perf_counter() - started
                        cpu[path] += time.process_time() - started_cpu
                    trips[path] += sent.count
            for path in PATHS:
                with override_settings(SLUICE_QUEUES=settings_of[path]):
                    clear_critical()
                rates[path].append(calls / wall[path])
                cpu_us[path].append(cpu[path] / calls * 1e6)
            if progress:
                progress(round_no + 1, rounds, {k: v[-1] for k, v in rates.items()})
    return report(rates, cpu_us, latencies, trips, commands, calls, rounds, replicas)


def users_on(cluster, users, queues):
    """Those of ``users`` whose partition the cluster's first primary holds."""
    with override_settings(SLUICE_QUEUES=queues):
        whole = sluice_settings().queues["critical"]
        slot_of = get_redis(whole.redis_url).keyslot
        first = cluster.primaries()[0].port
        held = {n for n, part in enumerate(whole.every_partition) if cluster.owner(slot_of(part.tag)).port == first}
    return [user for user in users if partition_of(user.pk, whole.partitions) in held]


def report(rates, cpu_us, latencies, trips, commands, calls, rounds, replicas):
    rate = {path: statistics.median(rates[path]) for path in PATHS}
    cpu = {path: statistics.median(cpu_us[path]) for path in PATHS}
    one, on_cluster = commands["one_redis"], commands["cluster"]
    return {
        "notify_per_s": {path: round(rate[path]) for path in PATHS},
        "producer_cpu_us_per_call": {path: round(cpu[path], 1) for path in PATHS},
        # Cost ratios, cluster over one Redis: above 1, a call on the cluster costs the producer more.
        "cluster_vs_one_redis_wall": round(rate["one_redis"] / rate["cluster"], 3),
        "cluster_vs_one_redis_cpu": round(cpu["cluster"] / cpu["one_redis"], 3),
        "cluster_one_primary_vs_one_redis_wall": round(rate["one_redis"] / rate["cluster_one_primary"], 3),
        "cluster_one_primary_vs_one_redis_cpu": round(cpu["cluster_one_primary"] / cpu["one_redis"], 3),
        "notify_p50_ms": {path: round(percentile(latencies[path], 50) * 1000, 3) for path in PATHS},
        "notify_p99_ms": {path: round(percentile(latencies[path], 99) * 1000, 3) for path in PATHS},
        # Client side, in every timed call: what this process sent to any Redis.
        "round_trips_per_notify": {path: round(trips[path] / (calls * rounds), 3) for path in PATHS},
        # Server side: the commands that ran for one call, the scripts' own included. On one Redis, on the bench's
        # Redis; on the cluster, summed over its primaries, and what the bench's Redis still ran (nothing).
        "redis_commands_per_notify": {"one_redis": one["plain"], "cluster": on_cluster["primaries"]},
        "scripts_per_notify": {
            "one_redis": _calls_of(one["plain"], "evalsha", "eval"),
            "cluster": _calls_of(on_cluster["primaries"], "evalsha", "eval"),
        },
        "bench_redis_commands_per_cluster_notify": on_cluster["plain"],
        "primaries": 3,
        "replicas_per_primary": replicas,
        "partitions": PARTITIONS,
        "users": USERS,
        "calls_per_round": calls,
        "rounds": rounds,
    }


def _calls_of(commands, *names):
    return round(sum(commands.get(name, 0) for name in names), 3)
