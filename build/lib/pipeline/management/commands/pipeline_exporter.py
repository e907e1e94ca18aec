"""manage.py pipeline_exporter: Prometheus /metrics and KEDA /scaler/<queue> for the Sluice queues."""

from django.core.management.base import BaseCommand

from pipeline.exporter import serve


class Command(BaseCommand):
    help = "Serve /metrics (Prometheus) and /scaler/<queue> (KEDA metrics-api) from Redis."

    def add_arguments(self, parser):
        parser.add_argument("--host", default="0.0.0.0")
        parser.add_argument("--port", type=int, default=9808)
        parser.add_argument("--window", type=float, default=120.0, help="seconds of history for windowed signals")
        parser.add_argument("--sample-every", type=float, default=5.0, help="seconds between samples")

    def handle(self, host, port, window, sample_every, **options):
        self.stdout.write(f"exporter on http://{host}:{port}/metrics and /scaler/<queue>, window {window:g} s")
        serve(host, port, window, sample_every)
