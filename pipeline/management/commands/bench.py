"""manage.py bench <name>: run a benchmark and report figures measured side by side in one run."""

import json

from django.core.management.base import BaseCommand

from pipeline.bench.common import bench_redis, write_json


class Command(BaseCommand):
    help = "Run a benchmark: admission."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="name", required=True)
        admission = sub.add_parser("admission", help="notify() vs apply_async vs raw LPUSH")
        admission.add_argument("--calls", type=int, default=3000)
        admission.add_argument("--rounds", type=int, default=3)
        for command in sub.choices.values():
            command.add_argument("--json", dest="json_path", help="also write the figures to this file")

    def handle(self, name, json_path=None, **options):
        with bench_redis(self.stdout):
            result = getattr(self, f"bench_{name}")(**options)
        write_json(json_path, result)
        self.stdout.write(json.dumps(result, indent=2, sort_keys=True))

    def bench_admission(self, calls, rounds, **options):
        from pipeline.bench import admission

        def progress(done, total, last):
            shown = ", ".join(f"{k} {v:,.0f}/s" for k, v in last.items())
            self.stdout.write(f"round {done}/{total}: {shown}")

        result = admission.run(calls, rounds, progress)
        self.stdout.write(
            f"notify() is {result['notify_vs_apply_async']}x apply_async (target >= 3x); raw LPUSH is "
            f"{result['lpush_vs_notify_per_call']}x notify() per call (target <= 2x)"
        )
        return result
