"""Run bench schedule's parts and write bench-out/schedule/bench.{md,json}."""

import json
import os
import socket
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from . import schedule_lateness, schedule_move, schedule_spike
from .common import fresh_database

PARTS = ("move", "lateness", "spike")


def run(redis_url, part, scale, out, stdout):
    """Run ``part`` (or "all"), write the report files into ``out``; return the JSON result."""
    chosen = PARTS if part == "all" else (part,)
    result = {
        "scale": scale,
        "host": f"{socket.gethostname()} ({os.cpu_count()} CPUs)",
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
    }
    if "move" in chosen:
        stdout.write("move: a weekly meeting's reminders moved a year ahead")
        result["move"] = schedule_move.run(scale, stdout)
    if "lateness" in chosen:
        stdout.write("lateness: scheduled reminders due while the incident replays")
        result["lateness"] = {}
        for reservable in schedule_lateness.RESERVABLES:
            stdout.write(f"  reservable {reservable}")
            with tempfile.TemporaryDirectory(prefix="sluice-schedule-") as scratch:
                late = schedule_lateness.run(redis_url, scale, stdout, fresh_database(scratch), reservable)
            result["lateness"][f"reservable_{reservable}"] = late
            stdout.write(
                f"  sent - send_at: {late['lateness_at_provider_return']}; lost {late['lost']}, doubled "
                f"{late['doubled']}; the incident's critical p99 beside them {late['incident_critical_p99_ms']} ms"
            )
        # The target is for a pool whose unreserved share holds the incident's own critical sends (docs/scheduling.md).
        result["lateness"]["holds"] = result["lateness"][f"reservable_{schedule_lateness.FITTING}"]["holds"]
    if "spike" in chosen:
        stdout.write("spike: critical reminders due in the same second")
        result["spike"] = schedule_spike.run(redis_url, scale, stdout)
    result["holds"] = all(result[name]["holds"] for name in chosen)
    # The machine's load as the run ended (1, 5, 15 minutes): lateness measured on a busy host says so.
    result["load_average"] = [round(n, 1) for n in os.getloadavg()]
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "bench.json").write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    (folder / "bench.md").write_text(markdown(result))
    stdout.write(f"report: {folder / 'bench.md'}")
    return result


def markdown(result):
    """The report as a page: one table a part."""
    lines = [
        "# bench schedule",
        "",
        f"{result['date']} on {result['host']} (load average {result['load_average']} at the end), scale "
        f"{result['scale']}. Every target holds: **{result['holds']}**.",
        "",
    ]
    move = result.get("move")
    if move:
        lines += [
            f"## Move: {move['attendees']} attendees × {move['occurrences']} occurrences = {move['reminders']:,} "
            "reminders moved a year ahead",
            "",
            "| moved by | calls | wall s | producer CPU s | Redis commands | Redis CPU ms | DB queries | "
            "sent at old times | sent once at new times | missing | doubled |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for method in schedule_move.METHODS:
            m = move[method]
            lines.append(
                f"| {method}() | {m['calls']:,} | {m['wall_s']} | {m['producer_cpu_s']} | {m['redis_commands']:,} | "
                f"{m['redis_cpu_ms']} | {m['db_queries']:,} | {m['published_at_old_times']} | "
                f"{m['reminders_sent_exactly_once']:,} | {m['reminders_missing']} | {m['reminders_doubled']} |"
            )
        lines += ["", f"notify_many() moves it {move['notify_many_vs_notify_wall']}× faster by wall clock.", ""]
    lateness = result.get("lateness")
    if lateness:
        runs = [lateness[f"reservable_{r}"] for r in schedule_lateness.RESERVABLES if f"reservable_{r}" in lateness]
        first = runs[0]
        lines += [
            f"## Lateness: {first['reminders']} reminders ({first['meetings']} meetings) due during the incident "
            f"replay ({first['incident_events']:,} events), the critical pool at "
            f"{first['rate_per_s']}/s",
            "",
            "| reservable | reserved a second | sent − send_at p50 s | p99 s | max s | later than 1 s | "
            "later than 2 s | early (window) | lost | doubled | the incident's critical p99 ms |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for late in runs:
            q = late["lateness_at_provider_return"]
            lines.append(
                f"| {late['reservable']} | {late['reserved_per_s']} | {q['p50_s']} | {q['p99_s']} | {q['max_s']} | "
                f"{late['late_over_1s']} | {late['late_over_2s']} | {late['sent_early_within_window']} | "
                f"{late['lost']} | {late['doubled']} | {late['incident_critical_p99_ms']} |"
            )
        lines += ["", "sent is when the provider returned (145 ms after the send began).", ""]
    spike = result.get("spike")
    if spike:
        short, fits = spike["short_window"], spike["window_that_fits"]
        lines += [
            f"## Spike: {fits['reminders']:,} critical reminders due at 09:50:00, a pool sending "
            f"{fits['pool_rate_measured_per_s']}/s (rate_per_s {fits['rate_per_s']}: "
            f"{schedule_spike.per_s(fits['rate_per_s'])}/s reservable; the short window at "
            f"{schedule_spike.RATE_PER_S}: {schedule_spike.per_s()}/s)",
            "",
            "| window | scheduled | refused at scheduling | first due | first sent | last sent | after send_at | "
            "lost | doubled |",
            "|---|---|---|---|---|---|---|---|---|",
            f"| {fits['window_s']} s | {fits['scheduled']:,} | {fits['refused']:,} | {fits['first_due']} | "
            f"{fits['first_sent']} | {fits['last_sent']} | {fits['sent_after_send_at']} | {fits['lost']} | "
            f"{fits['doubled']} |",
            f"| {short['window_s']} s | {short['scheduled']:,} | {short['refused']:,}, told "
            f"{', '.join(short['refusal_times'])} | {short['first_due']} | not sent | | | | |",
            "",
            f"Most sent in one second: {fits['most_sent_in_one_second']}; most reserved in one second: "
            f"{fits['reserved_most_in_one_second']}. A refused reminder scheduled at the time it was told: "
            f"{short['refused_then_scheduled_at_that_time']}.",
            "",
        ]
    return "\n".join(lines)
