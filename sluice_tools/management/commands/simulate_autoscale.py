"""manage.py simulate_autoscale: windowed-latency KEDA scaling (with and without the scheduled trigger on a trace of
scheduled sends) vs instant depth vs a fixed peak pool."""

import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from sluice_tools.autoscale import config, plot, seeds_report, sim, traces


class Command(BaseCommand):
    help = (
        "Simulate the worker pools under the chart's KEDA/HPA settings (helm/sluice/values.yaml) and compare "
        "scaling on windowed latency (with and without the scheduled trigger, on a trace of scheduled sends), "
        "on instant depth, and a fixed pool sized for the peak."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--trace",
            default="incident",
            help=f"{', '.join(traces.BUILT_IN)}, or a CSV file (columns: second, critical, ...)",
        )
        parser.add_argument("--out", default="autoscale-sim", help="directory for the PNG plot")
        parser.add_argument("--json", dest="json_path", help="write the per-policy summary to this JSON file")
        parser.add_argument("--values", action="append", default=[], help="a values file merged over the chart's")
        parser.add_argument("--mu", action="append", default=[], help="μ per pod of a class, msg/s: routine=55")
        parser.add_argument(
            "--capacity-json", help="the JSON of manage.py capacity --json: measured mu_per_worker per queue"
        )
        parser.add_argument("--startup-s", type=int, default=30, help="seconds from scale-up to a pod serving")
        parser.add_argument(
            "--admission",
            action="store_true",
            help="bound each queue at its capacity (SLUICE_QUEUES): what does not fit is folded or refused",
        )
        parser.add_argument("--seed", type=int, default=7, help="seed of the built-in traces")
        parser.add_argument(
            "--seeds",
            help="run many days of a built-in trace (1-20, or 1,4,9) and report per policy: seeds with a flap, "
            "replica-seconds min/median/max, p99 per class",
        )
        parser.add_argument("--markdown", help="with --seeds: write the report as markdown to this file")
        parser.add_argument(
            "--plot-seed", type=int, help="with --seeds: the day to plot (default: the windowed policy's worst)"
        )

    def handle(self, *args, **options):
        seeds = None
        try:
            if options["seeds"] is not None:
                if options["trace"] not in traces.BUILT_IN:
                    raise ValueError(f"--seeds needs a built-in trace ({', '.join(traces.BUILT_IN)})")
                seeds = seeds_report.parse_seeds(options["seeds"])
            trace = traces.load(options["trace"], seed=seeds[0] if seeds else options["seed"])
            values = config.load_values(config.CHART_VALUES, options["values"])
            scaling = config.chart_scaling(values)
            # A pod runs the chart's workers.<class>.concurrency slots: μ per pod follows it.
            mu = config.settings_mu(scaling.slots)
            if options["capacity_json"]:
                from pipeline.conf import sluice_settings

                names = {k: q.name for k, q in sluice_settings().queues.items()}
                mu.update(config.capacity_mu(options["capacity_json"], names, scaling.slots))
            mu.update(config.parse_mu_overrides(options["mu"]))
        except (OSError, ValueError, KeyError) as exc:
            raise CommandError(str(exc)) from exc
        if options["startup_s"] < 0:
            raise CommandError("--startup-s must not be negative")
        capacity = None
        if options["admission"]:
            from pipeline.conf import sluice_settings

            # One capacity for the fluid model: the smallest bound among the classes.
            capacity = min(q.capacity for q in sluice_settings().queues.values())
        out = Path(options["out"])
        out.mkdir(parents=True, exist_ok=True)
        run = {"scaling": scaling, "mu": mu, "startup_s": options["startup_s"], "capacity": capacity}
        if seeds is not None:
            self._seeds(options, seeds, run, out)
            return
        runs = sim.simulate(trace, scaling, mu, startup_s=options["startup_s"], capacity=capacity)
        summary = sim.summarise(runs)
        marks = {klass: due.spikes() for klass, due in trace.scheduled.items()}
        png = plot.plot(runs, scaling, out / f"autoscale-{trace.name}.png", self._title(trace, mu), marks)
        if options["json_path"]:
            Path(options["json_path"]).write_text(json.dumps(summary, indent=2) + "\n")
        self._report(trace, scaling, mu, summary, png)

    def _seeds(self, options, seeds, run, out):
        """Simulate each seed's day, then write the aggregate (markdown, JSON) and plot one day."""
        name = options["trace"]
        per_seed = {}
        for seed in seeds:
            runs = self._simulate(name, seed, run)
            per_seed[seed] = sim.summarise(runs)
            row = per_seed[seed]
            self.stderr.write(
                f"seed {seed}: "
                + ", ".join(f"{p} {r['replica_seconds']} rs, {r['flaps']} flaps" for p, r in row.items())
            )
        plot_seed = options["plot_seed"] if options["plot_seed"] is not None else self._worst(per_seed)
        parameters = {"mu": run["mu"], "startup_s": run["startup_s"], "plot_seed": plot_seed}
        doc = seeds_report.report(name, per_seed, parameters)
        text = seeds_report.markdown(doc)
        runs = self._simulate(name, plot_seed, run)
        trace = traces.load(name, seed=plot_seed)
        title = f"{self._title(trace, run['mu'])}, seed {plot_seed}"
        png = plot.plot_day(runs, run["scaling"], out / f"autoscale-{trace.name}-seed{plot_seed}.png", title)
        if options["json_path"]:
            Path(options["json_path"]).write_text(json.dumps(doc, indent=2) + "\n")
        if options["markdown"]:
            Path(options["markdown"]).write_text(text)
        self.stdout.write(text)
        self.stdout.write(f"plot: {png}")

    @staticmethod
    def _simulate(name, seed, run):
        trace = traces.load(name, seed=seed)
        return sim.simulate(trace, run["scaling"], run["mu"], startup_s=run["startup_s"], capacity=run["capacity"])

    @staticmethod
    def _worst(per_seed):
        """The windowed policy's worst day: the most flaps, then the most replica-seconds."""
        policy = "windowed_latency"
        return max(per_seed, key=lambda s: (per_seed[s][policy]["flaps"], per_seed[s][policy]["replica_seconds"]))

    def _title(self, trace, mu):
        rates = ", ".join(f"{k} μ={mu[k]:.1f}/s" for k in traces.CLASSES)
        return f"trace {trace.name}: {trace.seconds} s ({rates})"

    def _report(self, trace, scaling, mu, summary, png):
        self.stdout.write(f"trace {trace.name}: {trace.seconds} s, arrivals {self._totals(trace)}")
        for klass in traces.CLASSES:
            s = scaling.classes[klass]
            self.stdout.write(
                f"  {klass}: target {s.target:g} s, {s.min_replicas}-{s.max_replicas} pods, "
                f"μ {mu[klass]:.1f} msg/s per pod"
            )
        for policy, row in summary.items():
            p99 = ", ".join(f"{k} {v:g} s" for k, v in row["p99_s"].items())
            self.stdout.write(
                f"{policy:18s} p99 [{p99}]  replica-seconds {row['replica_seconds']}  flaps {row['flaps']}"
            )
            for klass, due in row.get("scheduled", {}).items():
                ready = ", ".join(map(str, due["ready_at_first_due"]))
                self.stdout.write(
                    f"{'':18s} scheduled {klass}: {due['sends']} sends, lateness p99 {due['p99_s']:g} s, "
                    f"max {due['max_s']:g} s, {due['late']} late; ready pods at each spike's first second: {ready}"
                )
        self.stdout.write(f"plot: {png}")

    @staticmethod
    def _totals(trace):
        return ", ".join(f"{k} {int(trace.arrivals[k].sum())}" for k in traces.CLASSES)
