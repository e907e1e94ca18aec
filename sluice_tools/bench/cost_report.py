"""bench cost: run its parts (costs, no-op, memory, profile, ceiling) and sum them up per class and outcome."""

from django.test import override_settings

from pipeline.connections import get_redis

from . import ceiling, cost, hotpath, memory

#: The seed's traffic mix and peak.
MIX = {"critical": 0.06, "routine": 0.80, "background": 0.14}
PEAK_PER_S = memory.PEAK_PER_S


def end_to_end(part):
    """One outcome's figures summed over the producer, the flush (per event) and the worker (per event)."""
    sides = [part["producer"]]
    per_digest = part.get("events_per_digest")
    if per_digest:
        sides += [_scaled(part["flush_per_digest"], 1 / per_digest), _scaled(part["worker_per_digest"], 1 / per_digest)]
    else:
        sides.append(part["worker"])
    return {
        "commands_per_event": round(sum(side["commands_per_event"] for side in sides), 2),
        "redis_cpu_us_per_event": round(sum(side["redis_cpu_us_per_event"] for side in sides), 1),
        "producer_cpu_us_per_event": part["producer"]["cpu_us_per_event"]["producer"],
        "worker_cpu_us_per_event": round(sides[-1]["cpu_us_per_event"]["worker"], 1),
    }


def _scaled(figures, factor):
    return {
        "commands_per_event": figures["commands_per_event"] * factor,
        "redis_cpu_us_per_event": figures["redis_cpu_us_per_event"] * factor,
        "cpu_us_per_event": {name: us * factor for name, us in figures["cpu_us_per_event"].items()},
    }


def run(redis_url, events, rounds, ceiling_seconds, producers, stdout):
    """The whole report."""
    report = cost.run(redis_url, events, rounds, stdout)
    table = {}
    for klass, outcomes in report["classes"].items():
        for outcome, part in outcomes.items():
            table[f"{klass} {outcome}"] = end_to_end(part)
    report["table"] = table
    stdout.write("memory: claims and sent marks, before and after")
    client = get_redis()
    report["memory"] = memory.run(client)
    routine = report["classes"]["routine"]
    report["memory"]["bytes_per_admitted_message"] = routine["accepted"]["bytes_per_admitted_message"]
    report["memory"]["bytes_per_fold_key"] = routine["folded"]["fold_bytes_per_key"]
    report["memory"]["bytes_per_collapse_key"] = report["classes"]["background"]["collapsed"]["fold_bytes_per_key"]
    stdout.write("profile of the critical send task (a single send)")
    with override_settings(SLUICE_KINDS=cost.KINDS, SLUICE_CHANNELS=cost.CHANNELS):
        report["profile"] = hotpath.run("cost.critical")
        if ceiling_seconds and producers:
            stdout.write("one Redis driven by notify() processes")
            queues = {k: {"capacity": 10**8, "ceiling": 10**8} for k in MIX}
            with override_settings(SLUICE_QUEUES=queues):
                report["ceiling"] = ceiling.run("cost.routine", producers, ceiling_seconds, stdout)
    report["redis_version"] = client.info("server")["redis_version"]
    report["one_redis"] = one_redis(report)
    return report


def one_redis(report):
    """Notifications a second one Redis carries, end to end, at the seed's mix: from Redis's CPU per
    notification (one core busy all the time), and from commands per notification × the commands a second
    Redis ran per core when the most producers drove it."""
    table = report["table"]
    redis_us = sum(MIX[k] * table[f"{k} accepted"]["redis_cpu_us_per_event"] for k in MIX)
    commands = sum(MIX[k] * table[f"{k} accepted"]["commands_per_event"] for k in MIX)
    by_cpu = 1e6 / redis_us
    figures = {
        "mix": MIX,
        "redis_cpu_us_per_notification_mixed": round(redis_us, 1),
        "commands_per_notification_mixed": round(commands, 2),
        "notifications_per_s_per_redis_core": round(by_cpu),
        "seed_peak_per_s": PEAK_PER_S,
        "headroom_over_seed_peak": round(by_cpu / PEAK_PER_S, 1),
    }
    steps = (report.get("ceiling") or {}).get("steps") or []
    if steps:
        busiest = max(steps, key=lambda step: step["redis_cpu_cores"])
        per_core = busiest["redis_commands_per_s"] / busiest["redis_cpu_cores"]
        figures["redis_commands_per_s_per_core_when_driven"] = round(per_core)
        figures["notifications_per_s_by_commands"] = round(per_core / commands)
    return figures


def summary(report):
    """The table a person reads."""
    lines = ["", "class outcome            commands/event  Redis µs/event  producer µs  worker µs"]
    for name, row in report["table"].items():
        lines.append(
            f"{name:<26}{row['commands_per_event']:>10}{row['redis_cpu_us_per_event']:>16}"
            f"{row['producer_cpu_us_per_event']:>13}{row['worker_cpu_us_per_event']:>11}"
        )
    m = report["memory"]
    one = report["one_redis"]
    lines += [
        f"worker throughput over a bare no-op's, same worker, one run: critical single send "
        f"{report['critical_vs_noop']} (goal >= 0.8), routine batches {report['throughput_ratio_vs_noop']}",
        f"bytes: admitted message {m['bytes_per_admitted_message']}, fold key {m['bytes_per_fold_key']}, claim "
        f"{m['send_claim']['bytes_per_claim']}, sent mark {m['sent_mark_before']['bytes_per_mark']} before / "
        f"{m['sent_mark_after']['bytes_per_mark']} after",
        f"marks held at {m['rate_per_s']}/s sustained: {m['marks_held_at_rate_mib_before']} MiB before, "
        f"{m['marks_held_at_rate_mib_after']} MiB after",
        f"one Redis core: {one['notifications_per_s_per_redis_core']:,} notifications/s end to end "
        f"({one['headroom_over_seed_peak']}x the seed's {one['seed_peak_per_s']}/s peak)",
    ]
    return "\n".join(lines)
