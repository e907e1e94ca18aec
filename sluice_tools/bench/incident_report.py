"""The incident benchmark's report: JSON, markdown with the ratio lines and targets, and a PNG plot."""

import matplotlib

matplotlib.use("Agg")  # no screen: render straight to PNG

import matplotlib.pyplot as plt

from pipeline.conf import CLASSES

COLORS = {"critical": "tab:red", "routine": "tab:blue", "background": "tab:gray"}
LABELS = {
    "naive": "(a) naive: one unbounded FIFO",
    "celery_priority": "(b) Celery priorities on one queue",
    "sluice": "(c) Sluice",
    "sluice_many": "(d) Sluice, notify_many",
}


def targets(result, capacity, drain_s, flush_interval_s):
    """Sluice's targets, each with the measured figure and whether it holds."""
    sluice, floor = result["configs"]["sluice"], result["idle_floor_ms"]
    p99 = sluice["critical"]["p99_ms"] or 0
    return [
        ("critical p99 within 5x the idle floor p99", f"{p99} ms vs 5 x {floor['p99']} ms", p99 <= 5 * floor["p99"]),
        ("critical p99 <= 100 ms", f"{p99} ms", p99 <= 100),
        (
            "routine max within capacity drain time + flush interval",
            f"{sluice['routine']['max_ms'] / 1000:.1f} s vs {drain_s + flush_interval_s:.1f} s",
            (sluice["routine"]["max_ms"] or 0) / 1000 <= drain_s + flush_interval_s,
        ),
        ("at least 60% of routine folded", f"{sluice['folded_pct']}%", sluice["folded_pct"] >= 60),
        ("lost = 0", str(sluice["lost"]), sluice["lost"] == 0),
        (
            "max depth <= capacity, every queue",
            ", ".join(f"{k} {sluice[k]['max_depth']}/{capacity[k]}" for k in CLASSES),
            all(sluice[k]["max_depth"] <= capacity[k] for k in CLASSES),
        ),
    ]


def markdown(result, checks, plot_name, meta):
    """The report as markdown."""
    lines = [
        f"# Incident replay: {meta['burst_events']:,} events in {meta['burst_seconds']:g} s",
        "",
        f"Scale {meta['scale']}, on {meta['host']}, {meta['date']}. {meta['setup']}",
        "",
        f"Idle floor (one critical event on an idle pool, enqueue to send start): "
        f"p50 {result['idle_floor_ms']['p50']} ms, p99 {result['idle_floor_ms']['p99']} ms.",
        "",
        "| configuration | class | p50 ms | p99 ms | max ms | events | sent | max depth |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, config in result["configs"].items():
        for klass in CLASSES:
            c = config[klass]
            lines.append(
                f"| {LABELS[name]} | {klass} | {c['p50_ms']} | {c['p99_ms']} | {c['max_ms']} | "
                f"{c['events']} | {c['sent']} | {c['max_depth']} |"
            )
    lines += [
        "",
        "| configuration | routine folded | routine events per message | rejected | lost | Redis peak |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, config in result["configs"].items():
        lines.append(
            f"| {LABELS[name]} | {config['folded_pct']}% | {config['routine'].get('events_per_message')} | "
            f"{config['rejected']} | {config['lost']} | {config['redis_peak_bytes'] / 1e6:.1f} MB |"
        )
    ratios = result["ratios"]
    lines += [
        "",
        f"- critical p99, naive / Sluice: **{ratios['naive_over_sluice_critical_p99']}x**",
        f"- critical p99, Celery priorities / Sluice: **{ratios['priority_over_sluice_critical_p99']}x**",
        f"- Sluice critical p99 / idle floor p99: **{ratios['sluice_critical_p99_over_idle_floor']}x**",
        *(
            [
                f"- with notify_many: critical p99 {ratios['fanout_critical_p99_ms']} ms against "
                f"{ratios['one_by_one_critical_p99_ms']} ms one by one; routine events per message "
                f"{ratios['fanout_events_per_message']} against {ratios['one_by_one_events_per_message']}; "
                f"{ratios['fanout_calls']} producer calls against {ratios['one_by_one_calls']}"
            ]
            if "fanout_critical_p99_ms" in ratios
            else []
        ),
        "",
        "| target | measured | holds |",
        "|---|---|---|",
    ]
    lines += [f"| {name} | {measured} | {'yes' if ok else '**no**'} |" for name, measured, ok in checks]
    lines += ["", f"![latency and depth over time]({plot_name})", ""]
    return "\n".join(lines)


def plot(raws, path):
    """Send-start latency of every message, and queue depth, over time: one column per configuration."""
    fig, axes = plt.subplots(2, len(raws), figsize=(6 * len(raws), 7), sharex="col", squeeze=False)
    for column, (name, raw) in enumerate(raws.items()):
        start = raw["started"]
        top, bottom = axes[0][column], axes[1][column]
        for klass in CLASSES:
            mine = [r for r in raw["records"] if r["class"] == klass and r["t0"]]
            top.scatter(
                [r["started"] - start for r in mine],
                [r["started"] - r["t0"] for r in mine],
                s=2,
                color=COLORS[klass],
                label=klass,
            )
            sluice = name.startswith("sluice")
            queue = klass if sluice else "routine"
            if sluice or klass == "routine":
                bottom.plot(
                    [p["t"] - start for p in raw["samples"]],
                    [p[queue] for p in raw["samples"]],
                    color=COLORS[klass],
                    label=queue if sluice else "the one queue",
                )
        top.set_yscale("symlog", linthresh=0.1)
        top.set_title(LABELS[name])
        top.set_ylabel("enqueue to send start (s)")
        bottom.set_ylabel("queue depth")
        bottom.set_xlabel("time since start (s)")
        top.legend(markerscale=4, loc="upper left")
        bottom.legend(loc="upper right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
