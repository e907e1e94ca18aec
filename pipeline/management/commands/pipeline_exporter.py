"""manage.py pipeline_exporter: Prometheus /metrics and KEDA /scaler/<queue> for the Sluice queues."""

from django.core.management.base import BaseCommand, CommandError

from pipeline.conf import exporter_host
from pipeline.observe.exporter import serve


class Command(BaseCommand):
    help = "Serve /metrics (Prometheus) and /scaler/<queue> (KEDA metrics-api) from Redis."

    def add_arguments(self, parser):
        # The exporter has no login: it binds loopback unless told otherwise (SLUICE_EXPORTER_HOST or --host).
        parser.add_argument("--host", default=None, help="address to bind; default SLUICE_EXPORTER_HOST (127.0.0.1)")
        parser.add_argument("--port", type=int, default=9808)
        parser.add_argument("--window", type=float, default=120.0, help="seconds of history for windowed latency")
        parser.add_argument(
            "--floor-window",
            type=float,
            help="seconds over which busy_slots (the capacity floor) is averaged; default: --window",
        )
        parser.add_argument("--sample-every", type=float, default=5.0, help="seconds between samples")

    def handle(self, host, port, window, sample_every, floor_window=None, **options):
        if window <= 0 or (floor_window is not None and floor_window <= 0):
            raise CommandError("--window and --floor-window must be positive")
        host = host or exporter_host()
        floor = floor_window or window
        urls = f"http://{host}:{port}/metrics and /scaler/<queue>"
        ready = f"exporter on {urls}, latency window {window:g} s, floor window {floor:g} s"
        serve(host, port, window, sample_every, floor, on_listening=lambda: self.stdout.write(ready))
