"""Run the whole incident benchmark: idle floor, three configurations, then the report files."""

import json
import socket
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from pipeline.conf import CLASSES
from sluice_tools.bench import incident, incident_report, traffic

from .common import fresh_database


def run(redis_url, scale, out, flush_interval_s, stdout, fanout=False):
    """Measure, write ``out``/bench.{md,json,png}, and return the JSON result."""
    flush_interval_s = int(flush_interval_s or max(15, round(60 * scale)))
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)

    def progress(config, elapsed, point):
        depths = "  ".join(f"{k} {point.get(k, 0):>5}" for k in CLASSES)
        stdout.write(f"  {config:<16} {elapsed:6.1f} s   depth: {depths}", ending="\r")
        stdout.flush()

    scratch = tempfile.TemporaryDirectory(prefix="sluice-incident-")
    database_url = fresh_database(scratch.name)
    stdout.write("idle floor: one critical event at a time on an idle pool")
    floor = incident.idle_floor(redis_url, database_url=database_url)
    stdout.write(f"  p50 {floor['p50']} ms, p99 {floor['p99']} ms")
    raws, configs = {}, {}
    for name in (*incident.CONFIGS, *((incident.FANOUT_CONFIG,) if fanout else ())):
        stdout.write(f"{name}: replaying the incident at scale {scale}")
        raws[name] = incident.run_config(name, redis_url, scale, flush_interval_s, progress, database_url=database_url)
        configs[name] = incident.summarize(name, raws[name])
        c, r = configs[name]["critical"], configs[name]["routine"]
        stdout.write(f"\n  critical p50 {c['p50_ms']} ms, p99 {c['p99_ms']} ms; lost {configs[name]['lost']}")
        stdout.write(
            f"  routine p50 {r['p50_ms']} ms, p99 {r['p99_ms']} ms, max {r['max_ms']} ms; "
            f"{r['events']} events in / {r['sent']} messages out = {r['events_per_message']} events per message"
        )
    sluice_p99 = configs["sluice"]["critical"]["p99_ms"]
    result = {
        "idle_floor_ms": {"p50": floor["p50"], "p99": floor["p99"]},
        "configs": configs,
        "ratios": {
            "naive_over_sluice_critical_p99": round(configs["naive"]["critical"]["p99_ms"] / sluice_p99, 1),
            "priority_over_sluice_critical_p99": round(
                configs["celery_priority"]["critical"]["p99_ms"] / sluice_p99, 1
            ),
            "sluice_critical_p99_over_idle_floor": round(sluice_p99 / floor["p99"], 2),
        },
        "scale": scale,
        "flush_interval_s": flush_interval_s,
    }
    if fanout:
        many, one = configs[incident.FANOUT_CONFIG], configs["sluice"]
        result["ratios"].update(
            fanout_critical_p99_ms=many["critical"]["p99_ms"],
            one_by_one_critical_p99_ms=one["critical"]["p99_ms"],
            fanout_events_per_message=many["routine"]["events_per_message"],
            one_by_one_events_per_message=one["routine"]["events_per_message"],
            fanout_calls=raws[incident.FANOUT_CONFIG]["calls"],
            one_by_one_calls=raws["sluice"]["calls"],
        )
    queues = incident.sluice_queues(scale)
    capacity = {k: queues[k]["capacity"] for k in CLASSES}
    drain_s = incident.TARGET_DRAIN_S * scale
    checks = incident_report.targets(result, capacity, drain_s, flush_interval_s)
    result["targets"] = [{"target": n, "measured": m, "holds": ok} for n, m, ok in checks]
    meta = {
        "scale": scale,
        # The burst as replayed: the incident's 9,360 events in 40 s, scaled.
        "burst_events": round(traffic.BURST_EVENTS * scale),
        "burst_seconds": traffic.BURST_SECONDS * scale,
        "host": f"{socket.gethostname()} ({__import__('os').cpu_count()} CPUs)",
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "setup": (
            f"Every configuration: {incident.SLOTS} worker slots, a provider taking "
            f"{incident.SEND_LATENCY_MS} ms a send (8 slots send about 55 msg/s, as in the incident), "
            f"background traffic at 90 events/min. Sluice splits its slots "
            f"{incident.SLUICE_POOLS} with capacities {capacity} (37 s of each pool's sending); "
            f"digests flush every {flush_interval_s:g} s or at 200 keys."
        ),
    }
    incident_report.plot(raws, out / "bench.png")
    (out / "bench.md").write_text(incident_report.markdown(result, checks, "bench.png", meta))
    (out / "bench.json").write_text(json.dumps(result, indent=2) + "\n")
    stdout.write(f"report: {out / 'bench.md'} and {out / 'bench.png'} ({time.strftime('%H:%M:%S')})")
    for name, measured, ok in checks:
        stdout.write(f"  {'ok  ' if ok else 'MISS'} {name}: {measured}")
    return result
