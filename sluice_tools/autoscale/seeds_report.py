"""Many seeds of one trace: per policy, seeds with a flap, replica-seconds and p99 waits, as JSON and markdown."""

import re
import statistics

from sluice_tools.autoscale.traces import CLASSES

BASELINE = "instant_depth"  # the policy "lean" is measured against


def parse_seeds(text):
    """``"1-20"``, ``"3,5,9"`` or ``"1-5,9"`` as a sorted list of distinct seeds."""
    seeds = set()
    for part in str(text).split(","):
        match = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", part)
        if not match:
            raise ValueError(f"--seeds takes numbers and ranges such as 1-20 or 1,4,9: {text!r}")
        first = int(match[1])
        last = int(match[2]) if match[2] else first
        if last < first:
            raise ValueError(f"--seeds: the range {part.strip()!r} runs backwards")
        seeds.update(range(first, last + 1))
    return sorted(seeds)


def aggregate(per_seed):
    """Per policy over ``{seed: summary}`` (each a ``sim.summarise`` result).

    Besides flaps, replica-seconds and p99 per class, each policy gets its replica-seconds as a
    ratio to the baseline's on the same seed (instant depth), the measure of "lean".
    """
    seeds = sorted(per_seed)
    policies = list(per_seed[seeds[0]])
    table = {}
    for policy in policies:
        rows = [per_seed[s][policy] for s in seeds]
        spent = [r["replica_seconds"] for r in rows]
        entry = {
            "seeds": len(seeds),
            "seeds_with_flap": sum(1 for r in rows if r["flaps"] > 0),
            "flaps": sum(r["flaps"] for r in rows),
            "flapping_seeds": {str(s): per_seed[s][policy]["flaps"] for s in seeds if per_seed[s][policy]["flaps"]},
            "replica_seconds": {"min": min(spent), "median": statistics.median(spent), "max": max(spent)},
            "p99_s": {
                k: {
                    "min": min(r["p99_s"][k] for r in rows),
                    "median": statistics.median(r["p99_s"][k] for r in rows),
                    "max": max(r["p99_s"][k] for r in rows),
                }
                for k in CLASSES
            },
        }
        scheduled = _scheduled([per_seed[s][policy].get("scheduled", {}) for s in seeds])
        if scheduled:
            entry["scheduled"] = scheduled
        if BASELINE in policies:
            ratios = [per_seed[s][policy]["replica_seconds"] / per_seed[s][BASELINE]["replica_seconds"] for s in seeds]
            entry["vs_instant_depth"] = {"min": round(min(ratios), 3), "max": round(max(ratios), 3)}
        table[policy] = entry
    return table


def _scheduled(rows):
    """Per class over the seeds: the scheduled sends, how many were late, the worst p99 and maximum lateness, and the
    fewest and most ready pods at a spike's first second."""
    found = {}
    for klass in CLASSES:
        days = [row[klass] for row in rows if klass in row]
        if not days:
            continue
        ready = [n for day in days for n in day["ready_at_first_due"]]
        found[klass] = {
            "sends": sum(day["sends"] for day in days),
            "late": sum(day["late"] for day in days),
            "p99_s": max(day["p99_s"] for day in days),
            "max_s": max(day["max_s"] for day in days),
            "ready_at_first_due": {"min": min(ready, default=0), "max": max(ready, default=0)},
        }
    return found


def report(trace_name, per_seed, extra=None):
    """The JSON document of a ``--seeds`` run: the aggregate table and every seed's summary."""
    return {
        "trace": trace_name,
        "seeds": sorted(per_seed),
        **(extra or {}),
        "policies": aggregate(per_seed),
        "per_seed": {str(s): per_seed[s] for s in sorted(per_seed)},
    }


def _k(value):
    """Replica-seconds in thousands: 617745 as ``618 k``, 1814400 as ``1.81 M`` (and 4500 as it is)."""
    if value >= 1e6:
        return f"{value / 1e6:.2f} M"
    return f"{value / 1e3:.0f} k" if value >= 1e4 else f"{value:.0f}"


def _seconds(value):
    return "0" if value == 0 else f"{value:.3g}"


def _range(stat):
    low, high = _seconds(stat["min"]), _seconds(stat["max"])
    return f"{low} s" if low == high else f"{low} – {high} s"


def markdown(doc, title=None):
    """The ``--seeds`` report as markdown: the table per policy, then one line per seed."""
    seeds = doc["seeds"]
    span = f"{seeds[0]}–{seeds[-1]}" if seeds == list(range(seeds[0], seeds[-1] + 1)) else ", ".join(map(str, seeds))
    lines = [f"## {title or doc['trace']}: seeds {span}", ""]
    head = "| policy | seeds with a flap | flaps | replica-seconds min / median / max | vs instant depth |"
    lines += [head + "".join(f" {k} p99 |" for k in CLASSES), "|---" * (5 + len(CLASSES)) + "|"]
    for policy, row in doc["policies"].items():
        spent = row["replica_seconds"]
        # Name the flapping seeds (seed: flaps) while they are few enough to read.
        few = len(row["flapping_seeds"]) <= 5
        flapping = ", ".join(f"{s}: {n}" for s, n in row["flapping_seeds"].items()) if few else ""
        ratio = row.get("vs_instant_depth")
        lines.append(
            f"| {policy} | {row['seeds_with_flap']} of {row['seeds']}"
            + (f" ({flapping})" if flapping else "")
            + f" | {row['flaps']} | {_k(spent['min'])} / {_k(spent['median'])} / {_k(spent['max'])} | "
            + (f"{ratio['min']:.3f} – {ratio['max']:.3f} |" if ratio else "– |")
            + "".join(f" {_range(row['p99_s'][k])} |" for k in CLASSES)
        )
    scheduled = [(p, k, row["scheduled"][k]) for p, row in doc["policies"].items() for k in row.get("scheduled", {})]
    if scheduled:
        lines += [
            "",
            "| policy | scheduled sends of | sends | late (after the target) | lateness p99 | lateness max |"
            " ready pods at a spike's first second |",
            "|---" * 7 + "|",
        ]
        for policy, klass, row in scheduled:
            ready = row["ready_at_first_due"]
            pods = f"{ready['min']}" if ready["min"] == ready["max"] else f"{ready['min']} – {ready['max']}"
            lines.append(
                f"| {policy} | {klass} | {row['sends']} | {row['late']} | {_seconds(row['p99_s'])} s"
                f" | {_seconds(row['max_s'])} s | {pods} |"
            )
    policies = list(doc["policies"])
    lines += ["", "| seed |" + "".join(f" {p} |" for p in policies), "|---" * (1 + len(policies)) + "|"]
    for seed, summary in doc["per_seed"].items():
        cells = []
        for policy in policies:
            row = summary[policy]
            p99 = "/".join(_seconds(row["p99_s"][k]) for k in CLASSES)
            cells.append(f" {_k(row['replica_seconds'])}, {row['flaps']} flaps, p99 {p99} s |")
        lines.append(f"| {seed} |" + "".join(cells))
    lines += ["", f"p99 per seed is critical/routine/background. {len(seeds)} days of the `{doc['trace']}` trace."]
    return "\n".join(lines) + "\n"
