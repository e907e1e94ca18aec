"""bench cluster: critical notifications through real workers on a Redis Cluster of 3 primaries against on one Redis.

bench cost's Run (produce, park, drain with a fresh worker, measure), with its counters read on every Redis at once:
on the cluster, each primary's own (INFO commandstats, INFO cpu) and the bench's Redis (SLUICE_REDIS_URL, which holds
the channel gates and the providers' breakers when critical is on a cluster: pipeline.connections.shared_url). Rounds
alternate between the two placements. Many users, so that each partition (CRC-32 of the user id) takes about its
share; each primary's share of the notifications is counted from its partitions' queues, and its share of the commands
and of the CPU is set beside it. What a shard's core carries (notifications a second if that core did nothing else) is
an extrapolation from its CPU per notification, not a measured throughput: this machine runs the producer, the worker
and every node on 2 cores.
"""

import json
import statistics
import time

from django.contrib.auth import get_user_model
from django.test import override_settings

from pipeline.broker.queues import queue_for_class
from pipeline.conf import queue_lists, sluice_settings
from pipeline.connections import client_of, get_redis
from pipeline.redis import keys

from . import cost
from .admission_cluster import cluster_queues, start_cluster
from .meter import Snapshot, minus_idle, per_event

KLASS = "critical"
USERS = 3000
PLAIN = "bench_redis"
# A drain's end is checked every 50 ms: on a cluster each check reads every partition.
POLL_S = 0.05
# The channels without a gate: what the cluster's shards carry then is a critical send's own work only.
UNGATED = {name: {"backend": cost.LOCMEM} for name in cost.CHANNELS}


class Meters:
    """Counters of several Redis at one moment (one meter.Snapshot each; the processes' CPU read with the first),
    and the commands the bench had sent to each by then to read it (subtracted: they are not a notification's)."""

    def __init__(self, clients, pids, polled):
        labels = enumerate(clients.items())
        self.parts = {label: Snapshot(client, pids if not n else {}) for n, (label, client) in labels}
        self.polled = {label: dict(counts) for label, counts in polled.items()}

    def until(self, later):
        by_redis = {}
        for label, part in self.parts.items():
            delta = part.until(later.parts[label])
            earlier = self.polled.get(label, {})
            for name, calls in later.polled.get(label, {}).items():
                delta["commands"][name] = delta["commands"].get(name, 0) - (calls - earlier.get(name, 0))
            delta["commands"] = {name: calls for name, calls in delta["commands"].items() if calls > 0}
            by_redis[label] = delta
        first = next(iter(by_redis.values()))
        commands = {}
        for delta in by_redis.values():
            for name, calls in delta["commands"].items():
                commands[name] = commands.get(name, 0) + calls
        return {
            "seconds": first["seconds"],
            "redis_cpu_s": sum(delta["redis_cpu_s"] for delta in by_redis.values()),
            "cpu_s": first["cpu_s"],
            "commands": commands,
            "by_redis": by_redis,
        }


class PlacementRun(cost.Run):
    """bench cost's Run for critical on one Redis (``cluster`` None) or on ``cluster``'s partitions."""

    poll_s = POLL_S

    def __init__(self, redis_url, events, stdout, cluster=None, gated=True):
        super().__init__(redis_url, events, 1, stdout)
        self.cluster = cluster
        self.channels = cost.CHANNELS if gated else UNGATED
        self.users = [get_user_model()(pk=n) for n in range(1, USERS + 1)]
        self.polled = {}
        self.carried = {}
        if cluster is None:
            self.clients = {"redis": self.client}
            self.spaces = [(self.client, queue_for_class(KLASS), "redis")]
            return
        # Read once: asking the cluster who its primaries are is itself a command on a node.
        self.clients = {str(node.port): node.admin() for node in cluster.primaries()}
        self.clients[PLAIN] = self.client
        with override_settings(SLUICE_QUEUES=self.queues(events * 4)):
            whole = sluice_settings().queues[KLASS]
            slot_of = get_redis(whole.redis_url).keyslot
            owner = {part.tag: str(cluster.owner(slot_of(part.tag)).port) for part in whole.every_partition}
            self.spaces = [(client_of(part), part.name, owner[part.tag]) for part in whole.every_partition]

    @property
    def shards(self):
        return [label for label in self.clients if label != PLAIN]

    def queues(self, capacity):
        if self.cluster is None:
            return super().queues(capacity)
        return cluster_queues(self.cluster.url, capacity)

    def worker_env(self):
        return {**super().worker_env(), "SLUICE_QUEUES": json.dumps(self.queues(self.events * 4))}

    def snapshot(self, pids):
        return Meters(self.clients, pids, self.polled)

    def minus_idle(self, delta, idle):
        less = minus_idle(delta, idle)
        idle_of = idle["by_redis"]
        less["by_redis"] = {label: minus_idle(part, idle_of[label]) for label, part in delta["by_redis"].items()}
        return less

    def per_event(self, delta, events):
        figures = per_event(delta, events)
        figures["by_redis"] = {
            label: {
                "commands": round(sum(part["commands"].values())),
                "commands_by_name": {name: round(calls) for name, calls in sorted(part["commands"].items())},
                "redis_cpu_s": round(part["redis_cpu_s"], 4),
            }
            for label, part in delta["by_redis"].items()
        }
        return figures

    def _count(self, label, name, calls=1):
        counts = self.polled.setdefault(label, {})
        counts[name] = counts.get(name, 0) + calls

    def hold(self, klass, tag):
        self.carried = dict.fromkeys(self.shards, 0)
        for client, queue, label in self.spaces:
            for name in queue_lists(queue):
                depth = client.llen(name)
                self.carried[label] += depth
                if depth:
                    client.rename(name, keys.bench("hold", tag, name))

    def release(self, klass, tag):
        for client, queue, label in self.spaces:
            for name in queue_lists(queue):
                held = keys.bench("hold", tag, name)
                self._count(label, "exists")
                if client.exists(held):
                    self._count(label, "rename")
                    client.rename(held, name)

    def drained(self, klass):
        for client, queue, label in self.spaces:
            lists = queue_lists(queue)
            self._count(label, "llen", len(lists))
            self._count(label, "hlen")
            depths = [client.llen(name) for name in lists]  # every one read: each is counted above
            if any(depths) or client.hlen(cost.UNACKED):
                return False
        return True

    def _heartbeats(self):
        pattern = "*" + keys.fetch_alive("*")
        return [key.decode() for label in self.shards for key in self.clients[label].keys(pattern)]

    def forget_heartbeats(self):
        for label in self.shards:
            for stale in self.clients[label].keys("*" + keys.fetch_alive("*")):
                self.clients[label].delete(stale)  # a stopped worker's, not this one's

    def heartbeating(self):
        """Whether the new worker is up: on a cluster, a heartbeat in every partition (it consumes each)."""
        alive = self._heartbeats()
        if self.cluster is None:
            return bool(alive)
        return all(any(key.startswith(client.tag) for key in alive) for client, _, _ in self.spaces)

    def one_round(self):
        """Produce, park and drain one batch; its end-to-end figures."""
        part = self.accepted(KLASS)
        return end_to_end(part, self.carried, self.events, self.shards)


def end_to_end(part, carried, events, shards):
    """Producer and worker summed: per notification, and per shard beside its share of the notifications."""
    producer, worker = part["producer"], part["worker"]
    total_commands = sum(side["by_redis"][label]["commands"] for side in (producer, worker) for label in shards)
    total_cpu = sum(side["by_redis"][label]["redis_cpu_s"] for side in (producer, worker) for label in shards)
    by_shard = {}
    for label in shards:
        commands = sum(side["by_redis"][label]["commands"] for side in (producer, worker))
        cpu_s = sum(side["by_redis"][label]["redis_cpu_s"] for side in (producer, worker))
        by_shard[label] = {
            "notifications_share": round(carried[label] / events, 3),
            "commands_share": round(commands / total_commands, 3),
            "redis_cpu_share": round(cpu_s / total_cpu, 3),
            "commands_per_notification": round(commands / carried[label], 2),
            "redis_cpu_us_per_notification": round(cpu_s / carried[label] * 1e6, 1),
            # Extrapolated: what this shard's core would carry busy with nothing else.
            "notifications_per_s_per_core": round(carried[label] / cpu_s) if cpu_s else None,
        }
    busiest = max(sum(side["by_redis"][label]["redis_cpu_s"] for side in (producer, worker)) for label in shards)
    figures = {
        "commands_per_notification": round(total_commands / events, 2),
        "redis_cpu_us_per_notification": round(total_cpu / events * 1e6, 1),
        "producer_commands_per_notification": producer["commands_per_event"],
        "worker_commands_per_notification": worker["commands_per_event"],
        "worker_per_s": worker["per_s"],
        "worker_cpu_us_per_notification": worker["cpu_us_per_event"]["worker"],
        "by_shard": by_shard,
        # Extrapolated: the shards each on a core of their own, the busiest full first.
        "notifications_per_s_all_shards": round(events / busiest) if busiest else None,
    }
    if PLAIN in producer["by_redis"]:
        plain = sum(side["by_redis"][PLAIN]["commands"] for side in (producer, worker))
        figures["bench_redis_commands_per_notification"] = round(plain / events, 3)
    return figures


def run(redis_url, events, rounds, stdout, replicas=1, gated=True):
    """``rounds`` rounds of ``events`` critical notifications on each placement, alternating; the report."""
    cluster = start_cluster(replicas)
    try:
        channels = cost.CHANNELS if gated else UNGATED
        with override_settings(SLUICE_KINDS=cost.KINDS, SLUICE_CHANNELS=channels):
            sides = {
                "one_redis": PlacementRun(redis_url, events, stdout, gated=gated),
                "cluster": PlacementRun(redis_url, events, stdout, cluster, gated),
            }
            results = {side: [] for side in sides}
            for n in range(rounds):
                for side in sides if n % 2 == 0 else tuple(reversed(sides)):
                    started = time.monotonic()
                    results[side].append(sides[side].one_round())
                    stdout.write(
                        f"round {n + 1}/{rounds}, {side}: {results[side][-1]['worker_per_s']}/s through the worker "
                        f"({time.monotonic() - started:.0f} s)"
                    )
    finally:
        cluster.stop()
    return report(results, events, rounds, replicas, gated)


def report(results, events, rounds, replicas, gated=True):
    """The round of median worker throughput of each placement, the balance of the cluster's, and the ratios."""
    median = {side: cost._median_round(rows_of(results[side])) for side in results}
    one, on_cluster = median["one_redis"], median["cluster"]
    shards = on_cluster["by_shard"]
    worst = max(
        abs(row[share] / row["notifications_share"] - 1)
        for row in shards.values()
        for share in ("commands_share", "redis_cpu_share")
    )
    per_core_one = one["by_shard"]["redis"]["notifications_per_s_per_core"]
    return {
        "one_redis": one,
        "cluster": on_cluster,
        "worker_per_s_rounds": {side: [row["worker_per_s"] for row in rows] for side, rows in results.items()},
        # How far a primary's share of the commands or the CPU strays from its share of the notifications.
        "worst_share_deviation": round(worst, 3),
        "cluster_vs_one_redis_commands": round(
            on_cluster["commands_per_notification"] / one["commands_per_notification"], 3
        ),
        "cluster_vs_one_redis_cpu": round(
            on_cluster["redis_cpu_us_per_notification"] / one["redis_cpu_us_per_notification"], 3
        ),
        "notifications_per_s_per_core": {
            "one_redis": per_core_one,
            "cluster_shard_median": statistics.median(row["notifications_per_s_per_core"] for row in shards.values()),
            "cluster_all_shards": on_cluster["notifications_per_s_all_shards"],
        },
        "extrapolated": "notifications a second from Redis CPU per notification, each Redis on a core of its own; "
        "this machine has 2 cores for every node, the producer and the worker",
        "gated": gated,
        "primaries": 3,
        "replicas_per_primary": replicas,
        "users": USERS,
        "events_per_round": events,
        "rounds": rounds,
    }


def rows_of(rows):
    """``rows`` with the key cost._median_round sorts by."""
    return [{**row, "per_s": row["worker_per_s"]} for row in rows]
