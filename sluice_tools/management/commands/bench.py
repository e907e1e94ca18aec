"""manage.py bench <name>: run a benchmark and report figures measured side by side in one run."""

import json

from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from sluice_tools.bench.common import bench_redis, write_json


class Command(BaseCommand):
    help = (
        "Run a benchmark: admission, gate, incident, schedule, soak, kills, folds, providers, batches, preferences, "
        "inbox, topic, cluster."
    )

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="name", required=True)
        admission = sub.add_parser("admission", help="notify() vs apply_async vs raw LPUSH")
        admission.add_argument("--calls", type=int, default=3000)
        admission.add_argument("--rounds", type=int, default=3)
        admission.add_argument(
            "--choices",
            action="store_true",
            help="every user has preferences, quiet hours and a throttled kind, all decided by admission",
        )
        admission.add_argument(
            "--idempotency",
            action="store_true",
            help="every notify() carries a new idempotency key; report the bytes one recorded key holds in Redis",
        )
        admission.add_argument(
            "--folds",
            action="store_true",
            help="the folded path instead: the folds on the class's Redis against on the digest's own Redis",
        )
        admission.add_argument(
            "--fanout",
            type=int,
            default=0,
            metavar="N",
            help="notify_many() for N users against a loop of N notify() calls (with --choices, --idempotency)",
        )
        admission.add_argument(
            "--activity",
            action="store_true",
            help="notify() with the activity log (SLUICE_ACTIVITY) on against off: the ratio, round trips, bytes",
        )
        admission.add_argument(
            "--flood",
            type=int,
            default=0,
            metavar="N",
            help="with --activity: N events over --flood-users users, drain stopped: the buffer's bound and dropped",
        )
        admission.add_argument("--flood-users", type=int, default=100_000, help="users of the --flood")
        admission.add_argument(
            "--durability",
            action="store_true",
            help='durability "replicated" (WAIT for a replica) against "async", on a primary with one replica',
        )
        admission.add_argument(
            "--cluster",
            action="store_true",
            help="a critical notify() on one Redis against on a Redis Cluster of 3 primaries: round trips, cost ratio",
        )
        admission.add_argument(
            "--cluster-replicas", type=int, default=1, help="replicas of each primary of the cluster (with --cluster)"
        )
        flood = sub.add_parser("gate", help="critical SMS latency under a background flood, gate on and off")
        flood.add_argument("--seconds", type=float, default=20)
        flood.add_argument("--flood", type=int, default=5000)
        incident = sub.add_parser("incident", help="replay the 9,360-events-in-40-s incident, three configurations")
        incident.add_argument("--scale", type=float, default=1.0, help="fraction of the burst (0.25 for a quick run)")
        incident.add_argument("--out", default="bench-out", help="folder for the markdown, JSON and PNG report")
        incident.add_argument(
            "--fanout",
            action="store_true",
            help="a fourth run: Sluice with notify_many() for what one action sends to many people",
        )
        incident.add_argument(
            "--flush-interval",
            type=float,
            default=None,
            help="seconds between digest flushes (default 60, scaled down with --scale)",
        )
        soak = sub.add_parser("soak", help="sustained overload: Redis memory, every process's RSS, critical p99")
        soak.add_argument("--minutes", type=float, default=5)
        soak.add_argument(
            "--rate-multiplier", type=float, default=10, help="offered load as a multiple of the bulk pools' capacity"
        )
        folds = sub.add_parser("folds", help="100,000 distinct entity ids against full queues: the fold store's bound")
        folds.add_argument("--events", type=int, default=100_000)
        folds.add_argument("--users", type=int, default=50)
        folds.add_argument(
            "--max-fold-bytes", type=int, default=None, help="the fold store's byte bound (default: SLUICE_DIGEST's)"
        )
        kills = sub.add_parser("kills", help="kill -9 worker process groups under load, in fetches too; count losses")
        kills.add_argument("--kills", type=int, default=200)
        kills.add_argument("--seed", type=int, default=12)
        kills.add_argument(
            "--at-once",
            action="store_true",
            help="kill --pods routine and background pods, busy with batches, at the same instant; time their "
            "messages back against the reaper's bound",
        )
        kills.add_argument("--pods", type=int, default=20, help="pods killed at once (with --at-once)")
        kills.add_argument("--runs", type=int, default=1, help="runs of --at-once, each with fresh pods")
        providers = sub.add_parser(
            "providers", help="provider A down for 20 s mid-burst: failover against a single one"
        )
        providers.add_argument("--seconds", type=float, default=60, help="length of the burst")
        providers.add_argument("--rate", type=float, default=20, help="critical sign-in codes a second")
        providers.add_argument(
            "--outage-at", type=float, default=20, help="when provider A goes down, s into the burst"
        )
        providers.add_argument("--outage", type=float, default=20, dest="outage_s", help="how long it stays down, s")
        providers.add_argument("--concurrency", type=int, default=4, help="critical worker processes")
        providers.add_argument("--drain", type=float, default=180, dest="drain_s", help="most seconds to wait after it")
        cost = sub.add_parser(
            "cost", help="Redis commands, Redis CPU and CPU per notification; a bare no-op; memory; one Redis's ceiling"
        )
        cost.add_argument("--events", type=int, default=2000, help="events in each measured batch")
        cost.add_argument("--rounds", type=int, default=3, help="Sluice and no-op batches drained alternately")
        cost.add_argument("--ceiling-seconds", type=float, default=8, help="seconds of each ceiling step (0: skip)")
        cost.add_argument(
            "--producers", default="1,2,4,8", help="producer processes of each ceiling step, comma-separated"
        )
        cost.add_argument(
            "--activity",
            action="store_true",
            help="instead: a worker's send with the activity log on against off, critical and routine",
        )
        on_cluster = sub.add_parser(
            "cluster",
            help="critical through real workers on a Redis Cluster of 3 primaries vs one Redis: each primary's share",
        )
        on_cluster.add_argument("--events", type=int, default=2000, help="critical notifications in each round")
        on_cluster.add_argument("--rounds", type=int, default=3, help="rounds of each placement, alternating")
        on_cluster.add_argument("--cluster-replicas", type=int, default=1, help="replicas of each primary")
        on_cluster.add_argument(
            "--ungated", action="store_true", help="channels without a gate (gates live on SLUICE_REDIS_URL's Redis)"
        )
        on_cluster.add_argument(
            "--pickup",
            type=int,
            default=0,
            metavar="PROBES",
            help="instead: an idle critical pool's pickup latency, PROBES single events a round, on each placement",
        )
        sub.add_parser(
            "preferences", help="one 64 KiB PUT /api/preferences/: Redis commands and time; 16 at once and /healthz"
        )
        batches = sub.add_parser(
            "batches", help="background throughput per slot, batched against single sends; critical p99 meanwhile"
        )
        batches.add_argument("--batch", type=int, default=200, help="background batch size measured against 1")
        batches.add_argument("--single-count", type=int, default=400, help="messages drained with single sends")
        batches.add_argument("--batched-count", type=int, default=10_000, help="messages drained in batches")
        batches.add_argument("--latency-ms", type=float, default=20.0, help="the provider's cost of one call")
        batches.add_argument("--per-message-ms", type=float, default=0.2, help="its cost of each message in a call")
        batches.add_argument("--seconds", type=float, default=25.0, help="how long critical events arrive")
        batches.add_argument("--rate", type=float, default=4.0, help="critical events a second")
        batches.add_argument("--flood", type=int, default=60_000, help="background messages drained meanwhile")
        inbox = sub.add_parser(
            "inbox", help="GET /api/inbox/unread/ through gunicorn: polls/s and p99 against /healthz"
        )
        inbox.add_argument("--seconds", type=float, default=10.0, help="how long each endpoint is polled")
        inbox.add_argument("--clients", type=int, default=8, help="polling clients at once, each on its connection")
        schedule = sub.add_parser(
            "schedule", help="scheduled sends: the meeting moved a year ahead, lateness beside the incident, the spike"
        )
        schedule.add_argument(
            "--part", choices=("move", "lateness", "spike", "all"), default="all", help="which part to run"
        )
        schedule.add_argument(
            "--scale", type=float, default=1.0, help="fraction of each part's size (0.1 for a quick run)"
        )
        schedule.add_argument("--out", default="bench-out/schedule", help="folder for bench.md and bench.json")
        topic = sub.add_parser(
            "topic", help="a topic of N subscribers fanned out through real workers; critical p99 during it vs idle"
        )
        topic.add_argument("--subscribers", type=int, default=100_000)
        topic.add_argument("--rate", type=float, default=20.0, help="login.code sends a second, idle and during it")
        topic.add_argument("--idle-seconds", type=float, default=10.0, dest="idle_s", help="how long the floor runs")
        for command in sub.choices.values():
            command.add_argument("--json", dest="json_path", help="also write the figures to this file")

    def handle(self, name, json_path=None, **options):
        # Workers read the same database (the flush rebuilds the opt-out mirror from it).
        call_command("migrate", interactive=False, verbosity=0)
        with bench_redis(self.stdout) as url:
            result = getattr(self, f"bench_{name}")(redis_url=url, **options)
        write_json(json_path, result)
        self.stdout.write(json.dumps(result, indent=2, sort_keys=True))

    def bench_topic(self, redis_url, subscribers, rate, idle_s, **options):
        from sluice_tools.bench import topic_fanout

        result = topic_fanout.run(redis_url, self.stdout, subscribers=subscribers, rate=rate, idle_s=idle_s)
        self.stdout.write(
            f"{subscribers:,} subscribers fanned out in {result['fanned_out_s']} s ({result['fanned_out_per_s']:,}/s; "
            f"all sent in {result['all_sent_s']} s); login.code p99 {result['critical_fanout_p99_ms']} ms during it "
            f"against {result['critical_idle_p99_ms']} ms idle ({result['critical_p99_fanout_vs_idle']}x) and "
            f"{result['critical_control_p99_ms']} ms while the same sends drain without a fan-out "
            f"({result['critical_p99_fanout_vs_control']}x); "
            f"{result['steps']} steps, the longest {result['step_max_s']} s"
        )
        return result

    def bench_admission(
        self,
        calls,
        rounds,
        choices=False,
        folds=False,
        idempotency=False,
        durability=False,
        fanout=0,
        activity=False,
        flood=0,
        flood_users=100_000,
        cluster=False,
        cluster_replicas=1,
        **options,
    ):
        from sluice_tools.bench import (
            admission_activity,
            admission_bench,
            admission_cluster,
            admission_durability,
            admission_fanout,
            admission_folds,
        )

        if fanout:
            result = admission_fanout.run(fanout, max(rounds, 5), None, choices, idempotency)
            for given in admission_fanout.INPUTS:
                each = result[f"users_as_{given}"]
                self.stdout.write(
                    f"{fanout} users as {given}: notify_many() {each['notify_many_ms']} ms against a loop of notify() "
                    f"{each['loop_ms']} ms ({each['wall_ratio']}x faster, {each['cpu_ratio']}x less producer CPU; "
                    f"target >= 10x); round trips {each['round_trips_notify_many']} against {each['round_trips_loop']}"
                )
            return result

        def progress(done, total, last):
            shown = ", ".join(f"{k} {v:,.0f}/s" for k, v in last.items())
            self.stdout.write(f"round {done}/{total}: {shown}")

        if activity and flood:
            result = admission_activity.flood(flood, flood_users, progress=progress)
            self.stdout.write(
                f"{flood:,} events over {flood_users:,} users at {result['events_per_s']:,}/s, drain stopped: the "
                f"buffer peaked at {result['buffer_length_peak_sampled']:,} entries "
                f"({result['buffer_bytes_peak_sampled']:,} bytes) for a bound of {result['buffer_entries']:,}; "
                f"{result['dropped']:,} dropped and counted"
            )
            return result
        if activity:
            result = admission_activity.run(calls, rounds, progress, choices)
            self.stdout.write(
                f"notify() with the activity log on runs at {result['on_vs_off_rate']}x its rate with the log off "
                f"(target >= 0.9); round trips {result['round_trips_per_notify']}; "
                f"{result['buffer_bytes_per_entry']} bytes an entry in the buffer"
            )
            return result
        if cluster:
            result = admission_cluster.run(calls, rounds, progress, cluster_replicas)
            trips, cmds = result["round_trips_per_notify"], result["scripts_per_notify"]
            self.stdout.write(
                f"a critical notify() on a Redis Cluster of 3 primaries costs the producer "
                f"{result['cluster_vs_one_redis_wall']}x the wall time and {result['cluster_vs_one_redis_cpu']}x the "
                f"CPU of one on one Redis (target <= 1.1); round trips {trips['cluster']} against "
                f"{trips['one_redis']} (target 1), scripts {cmds['cluster']} against {cmds['one_redis']}; with only "
                f"one primary's users (one server process): {result['cluster_one_primary_vs_one_redis_wall']}x the "
                f"wall time, {result['cluster_one_primary_vs_one_redis_cpu']}x the CPU"
            )
            return result
        if durability:
            result = admission_durability.run(calls, rounds, progress)
            self.stdout.write(
                f"a replicated notify() runs at {result['replicated_vs_async_rate']}x the rate of an async one; p50 "
                f"{result['replicated_p50_ms']} against {result['async_p50_ms']} ms, p99 {result['replicated_p99_ms']} "
                f"against {result['async_p99_ms']} ms; round trips {result['replicated_round_trips_per_notify']}"
            )
            return result
        if folds:
            result = admission_folds.run(calls, rounds, progress)
            self.stdout.write(
                f"a folded notify() with the digest's own Redis runs at {result['elsewhere_vs_here']}x the rate of one "
                f"folding on its class's Redis; round trips {result['round_trips_per_notify']}"
            )
            return result
        result = admission_bench.run(calls, rounds, progress, choices, idempotency)
        self.stdout.write(
            f"notify() is {result['notify_vs_apply_async']}x apply_async (target >= 3x); raw LPUSH is "
            f"{result['lpush_vs_notify_per_call']}x notify() per call (target <= 2x); "
            f"{result['round_trips_per_notify']} Redis round trips per notify()"
        )
        if idempotency:
            sizes = result["idempotency_key_bytes"]
            self.stdout.write(
                f"with an idempotency key: {result['round_trips_per_keyed_notify']} Redis round trips per notify(), "
                f"{result['keyed_vs_keyless_notify']}x the rate without one; a replay is "
                f"{result['round_trips_per_replay']} round trip; one recorded key holds {sizes['5_chars']} bytes in "
                f"Redis (MEMORY USAGE) for a 5-character key, {sizes['255_chars']} for a 255-character one; used "
                "memory per key: "
                + ", ".join(f"{per} bytes over {n} keys" for n, per in result["idempotency_key_used_bytes"].items())
            )
        return result

    def bench_gate(self, redis_url, seconds, flood, **options):
        from sluice_tools.bench import flood as scenario

        def progress(elapsed, sent):
            self.stdout.write(f"  {elapsed:5.1f} s: {sent} sends recorded", ending="\r")
            self.stdout.flush()

        runs = {}
        for label, enabled in (("gate", True), ("nogate", False)):
            self.stdout.write(f"flood with the gate {'on' if enabled else 'off'}: {flood} background SMS waiting")
            runs[label] = scenario.summarize(scenario.run(redis_url, enabled, seconds, flood, progress=progress))
            self.stdout.write("")
        gate, nogate = runs["gate"], runs["nogate"]
        result = {
            "critical_p50_ms_gate": gate["critical_p50_ms"],
            "critical_p99_ms_gate": gate["critical_p99_ms"],
            "critical_p50_ms_nogate": nogate["critical_p50_ms"],
            "critical_p99_ms_nogate": nogate["critical_p99_ms"],
            "critical_p99_ratio_nogate_over_gate": round(nogate["critical_p99_ms"] / gate["critical_p99_ms"], 1),
            "max_rate_observed_per_s": gate["max_rate_observed_per_s"],
            "runs": runs,
        }
        self.stdout.write(
            f"critical p99 {gate['critical_p99_ms']} ms with the gate, {nogate['critical_p99_ms']} ms without "
            f"({result['critical_p99_ratio_nogate_over_gate']}x); SMS never above "
            f"{gate['max_rate_observed_per_s']}/s in any second"
        )
        return result

    def bench_incident(self, redis_url, scale, out, flush_interval, fanout=False, **options):
        from sluice_tools.bench import incident_run

        return incident_run.run(redis_url, scale, out, flush_interval, self.stdout, fanout)

    def bench_schedule(self, redis_url, part, scale, out, **options):
        from sluice_tools.bench import schedule_report

        if not 0 < scale <= 1:
            raise CommandError(f"--scale must be more than 0 and at most 1, got {scale}")
        return schedule_report.run(redis_url, part, scale, out, self.stdout)

    def bench_preferences(self, redis_url, **options):
        from sluice_tools.bench import preferences_put

        return preferences_put.run(redis_url, self.stdout)

    def bench_inbox(self, redis_url, seconds, clients, **options):
        from sluice_tools.bench import inbox_poll

        result = inbox_poll.run(redis_url, self.stdout, seconds, clients)
        self.stdout.write(
            f"unread count: {result['unread_200']['polls_per_s']} polls/s, p99 {result['unread_200']['p99_ms']} ms "
            f"({result['unread_vs_healthz_rate']}x /healthz's rate, {result['healthz']['polls_per_s']}/s); with its "
            f"ETag (304): {result['unread_304']['polls_per_s']}/s, p99 {result['unread_304']['p99_ms']} ms"
        )
        return result

    def bench_folds(self, redis_url, events, users, max_fold_bytes=None, **options):
        from sluice_tools.bench import folds

        result = folds.run(redis_url, events, users, self.stdout, max_fold_bytes)
        self.stdout.write(
            f"\n{events:,} events: {result['by_grain']} by grain, {result['refused']} refused; store bytes peak "
            f"{result['store_bytes_peak_over_bound']} x its bound; Redis peak "
            f"{result['redis_used_memory_peak_mib']} MiB; unaccounted {result['unaccounted']}; when Redis was full: "
            f"{result['redis_full']}"
        )
        return result

    def bench_kills(self, redis_url, kills, seed, at_once=False, pods=20, runs=1, **options):
        from sluice_tools.bench import kills as scenario

        if at_once:
            return self.kills_at_once(redis_url, pods, runs, seed)

        result = scenario.run(redis_url, kills, seed, self.stdout)
        self.stdout.write(
            f"{result['kills']} kills ({result['kills_by_how']}): {result['events_accepted']} events accepted, "
            f"lost {result['lost']}, duplicated {result['duplicated']} "
            f"({result['duplicated_after_provider_returned']} killed after the provider returned)"
        )
        return result

    def kills_at_once(self, redis_url, pods, runs, seed):
        from sluice_tools.bench import kills_at_once

        results = []
        for run in range(runs):
            result = kills_at_once.run(redis_url, pods, seed + run, self.stdout)
            results.append(result)
            self.stdout.write(
                f"run {run + 1}/{runs}: {result['pods_killed']} pods killed at once, {result['messages_held_at_kill']} "
                f"messages held by {result['consumers_holding_at_kill']} consumers, slowest back after "
                f"{result['slowest_back_s']} s (bound {result['bound_s']} s); {result['events_accepted']} accepted, "
                f"{result['sends_recorded']} sends, lost {result['lost']}, duplicated {result['duplicated']} "
                f"({result['duplicated_after_provider_returned']} killed after the provider returned)"
            )
        return {"runs": results, "slowest_back_s": max(r["slowest_back_s"] or 0 for r in results)}

    def bench_providers(self, redis_url, seconds, rate, outage_at, outage_s, concurrency, drain_s, **options):
        from sluice_tools.bench import providers as scenario

        result = scenario.run(redis_url, seconds, rate, outage_at, outage_s, concurrency, drain_s, self.stdout)
        self.stdout.write(
            f"critical p99 enqueue -> accepted: {result['critical_p99_ms_failover']} ms with failover, "
            f"{result['critical_p99_ms_single_provider']} ms with provider A alone (during the outage: "
            f"{result['critical_p99_ms_during_outage_failover']} ms against "
            f"{result['critical_p99_ms_during_outage_single_provider']} ms); lost {result['lost']}, "
            f"duplicates {result['duplicates']}"
        )
        return result

    def bench_cost(self, redis_url, events, rounds, ceiling_seconds, producers, activity=False, **options):
        from sluice_tools.bench import cost_activity, cost_report

        if activity:
            result = cost_activity.run(redis_url, events, rounds, self.stdout)
            for klass, each in result["classes"].items():
                on, off = each["worker_log_on"], each["worker_log_off"]
                self.stdout.write(
                    f"{klass} worker: the log on runs at {each['on_vs_off_throughput']}x its throughput with the log "
                    f"off; Redis CPU {on['redis_cpu_us_per_event']} against {off['redis_cpu_us_per_event']} us and "
                    f"commands {on['commands_per_event']} against {off['commands_per_event']} a send"
                )
            return result

        try:
            steps = [int(n) for n in producers.split(",") if n.strip()]
        except ValueError:
            raise CommandError(f"--producers must be whole numbers separated by commas, got {producers!r}") from None
        if events < 8 or rounds < 1 or any(n < 1 for n in steps):
            raise CommandError("--events must be at least 8, --rounds and each of --producers at least 1")
        result = cost_report.run(redis_url, events, rounds, ceiling_seconds, steps, self.stdout)
        self.stdout.write(cost_report.summary(result))
        return result

    def bench_cluster(self, redis_url, events, rounds, cluster_replicas, ungated=False, pickup=0, **options):
        from sluice_tools.bench import cluster_cost, cluster_pickup

        if pickup:
            result = cluster_pickup.run(pickup, rounds, lambda done, total: self.stdout.write(f"round {done}/{total}"))
            one, on_cluster = result["one_redis"], result["cluster"]
            self.stdout.write(
                f"an idle critical pool picks a message up in p50 {on_cluster['p50_ms']} ms, p99 "
                f"{on_cluster['p99_ms']} ms on a Redis Cluster of 3 primaries ({result['partitions']} partitions), "
                f"against p50 {one['p50_ms']} ms, p99 {one['p99_ms']} ms on one Redis "
                f"({result['cluster_vs_one_redis_p50']}x, {result['cluster_vs_one_redis_p99']}x)"
            )
            return result

        if events < 12 or rounds < 1:
            raise CommandError("--events must be at least 12 (one per partition) and --rounds at least 1")
        result = cluster_cost.run(redis_url, events, rounds, self.stdout, cluster_replicas, not ungated)
        one, on_cluster = result["one_redis"], result["cluster"]
        per_core = result["notifications_per_s_per_core"]
        for port, row in on_cluster["by_shard"].items():
            self.stdout.write(
                f"primary {port}: {row['notifications_share']:.1%} of the notifications, {row['commands_share']:.1%} "
                f"of the commands, {row['redis_cpu_share']:.1%} of the Redis CPU; {row['commands_per_notification']} "
                f"commands and {row['redis_cpu_us_per_notification']} us a notification it carries"
            )
        self.stdout.write(
            f"per notification end to end: {on_cluster['commands_per_notification']} commands and "
            f"{on_cluster['redis_cpu_us_per_notification']} us of Redis CPU on the cluster, against "
            f"{one['commands_per_notification']} and {one['redis_cpu_us_per_notification']} us on one Redis (and "
            f"{on_cluster.get('bench_redis_commands_per_notification', 0)} on SLUICE_REDIS_URL's Redis: the gates and "
            f"breakers); shares "
            f"within {result['worst_share_deviation']:.1%} of the notifications' (target 15 %); extrapolated, a shard "
            f"core carries {per_core['cluster_shard_median']:,}/s (one Redis core {per_core['one_redis']:,}/s), the 3 "
            f"shards {per_core['cluster_all_shards']:,}/s"
        )
        return result

    def bench_soak(self, redis_url, minutes, rate_multiplier, **options):
        from sluice_tools.bench import soak

        return soak.run(redis_url, minutes, rate_multiplier, self.stdout)

    def bench_batches(self, redis_url, **options):
        from sluice_tools.bench import batches as scenario

        names = ("batch", "single_count", "batched_count", "latency_ms", "per_message_ms", "seconds", "rate", "flood")
        result = scenario.run(redis_url, self.stdout, **{name: options[name] for name in names})
        self.stdout.write(
            f"background per worker slot: {result['background_per_slot_per_s_batched']}/s in batches of "
            f"{result['batch']} against {result['background_per_slot_per_s_single']}/s one at a time "
            f"({result['background_batched_over_single']}x); critical p99 "
            f"{result['critical_p99_ms_background_batches']} ms while background batches run, "
            f"{result['critical_p99_ms_no_background']} ms with no background load"
        )
        return result
