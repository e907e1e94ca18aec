"""bench cost --activity: what the activity log adds to a worker's send, with the log on against off.

Batches of accepted events are produced first and parked; then, round by round, a fresh worker with SLUICE_ACTIVITY
on drains one batch and a fresh one with it off drains another of the same events, the order alternating, per class
(critical sends one at a time, routine in batches). The figures are each worker's Redis commands, Redis CPU and its
own CPU per event, and its throughput, as bench cost measures them.
"""

import json
import statistics

from django.test import override_settings

from pipeline.connections import get_redis
from pipeline.redis import keys

from .cost import CHANNELS, KINDS, Run, _median_round, hold

MODES = ("on", "off")


class ActivityRun(Run):
    """A bench cost run whose workers have the activity log on or off."""

    mode = "on"

    def worker_env(self):
        return {**super().worker_env(), "SLUICE_ACTIVITY": json.dumps({"enabled": self.mode == "on"})}

    def on_against_off(self, klass):
        batches = {mode: [] for mode in MODES}
        with override_settings(SLUICE_QUEUES=self.queues(self.events * 4)):
            for n in range(self.rounds):
                for mode in MODES:
                    self.produce(klass, self.events)
                    hold(self.client, klass, f"{mode}{n}")
                    batches[mode].append((f"{mode}{n}", self.events))
        results = {mode: [] for mode in MODES}
        # A fresh worker for each batch, the order alternating round by round: a neighbour's load on a shared
        # machine, and a worker's warm-up, fall on both modes alike.
        for n in range(self.rounds):
            for mode in MODES if n % 2 == 0 else tuple(reversed(MODES)):
                self.mode = mode
                worker = self.worker(klass)
                try:
                    results[mode] += list(self.drain(klass, [batches[mode][n]], worker).values())
                finally:
                    worker.stop()
        on, off = (statistics.median(r["per_s"] for r in results[m]) for m in MODES)
        return {
            "worker_log_on": _median_round(results["on"]),
            "worker_log_off": _median_round(results["off"]),
            "per_s_rounds": {m: [r["per_s"] for r in results[m]] for m in MODES},
            "on_vs_off_throughput": round(on / off, 3),
        }


def run(redis_url, events, rounds, stdout):
    """Critical and routine workers, the log on against off; returns the report."""
    client = get_redis()
    client.config_resetstat()
    with override_settings(SLUICE_KINDS=KINDS, SLUICE_CHANNELS=CHANNELS):
        bench = ActivityRun(redis_url, events, rounds, stdout)
        report = {}
        for klass in ("critical", "routine"):
            stdout.write(f"{klass}: a worker with the activity log on, then one with it off")
            report[klass] = bench.on_against_off(klass)
    client.delete(keys.activity())
    return {"events_per_batch": events, "rounds": rounds, "classes": report}
