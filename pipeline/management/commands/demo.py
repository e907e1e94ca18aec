"""manage.py demo: run the whole stack locally, send one notification of each kind, show them delivered."""

import json
import os
import re
import time

from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from notifications.conf import CLASSES
from notifications.kinds import all_kinds
from pipeline.processes import WorkerProcess
from pipeline.redis_server import RedisServer

CONSOLE = "notifications.channels.console.ConsoleChannel"
# The line ConsoleChannel prints for each send: "[push] critical   meeting.reminder: ..."
# Celery redirects a worker's stdout into its log, so the line can come after a log prefix.
DELIVERY = re.compile(r"\[\w+\] (critical|routine|background) .*")


class Command(BaseCommand):
    help = "Start Redis (REDIS_URL or a private one), migrate, run the three pools and deliver one of each kind."

    def add_arguments(self, parser):
        parser.add_argument("--exit", action="store_true", help="stop everything once the deliveries are shown")
        parser.add_argument("--timeout", type=float, default=60, help="seconds to wait for the deliveries")

    def handle(self, exit, timeout, **options):
        started = []
        try:
            redis_url = self._redis(started)
            call_command("migrate", interactive=False, verbosity=0)
            self.stdout.write("database migrated")
            channels = {name: {"backend": CONSOLE} for name in ("email", "sms", "push")}
            workers = [
                WorkerProcess(k, redis_url, channels, env={"SLUICE_CHANNELS": json.dumps(channels)}) for k in CLASSES
            ]
            for worker in workers:
                started.append(worker.start())
                self.stdout.write(f"{worker.klass} pool ready")
            self._send_one_of_each(redis_url)
            self._show_deliveries(workers, timeout)
        finally:
            for process in reversed(started):
                process.stop()
            self.stdout.write("stopped everything the demo started")

    def _redis(self, started):
        from django.conf import settings

        url = os.environ.get("REDIS_URL")
        if not url:
            server = RedisServer().start()
            started.append(server)
            url = server.url
            self.stdout.write(f"started a private redis-server at {url}")
        else:
            self.stdout.write(f"using REDIS_URL {url}")
        settings.REDIS_URL = settings.CELERY_BROKER_URL = url
        return url

    def _send_one_of_each(self, redis_url):
        from notifications import notify

        User = get_user_model()
        user, _ = User.objects.get_or_create(username="demo", defaults={"email": "demo@example.com"})
        for name, kind in all_kinds().items():
            outcome = notify(user, name, entity_id=f"{name.split('.')[0]}-1", payload={"title": "Quarterly review"})
            self.stdout.write(f"notify({name!r}) -> {outcome} on the {kind.klass} queue")

    def _show_deliveries(self, workers, timeout):
        expected = sum(len(kind.channels) for kind in all_kinds().values())
        deadline = time.monotonic() + timeout
        shown = set()
        while len(shown) < expected:
            if time.monotonic() > deadline:
                raise CommandError(f"only {len(shown)} of {expected} deliveries arrived in {timeout:.0f}s")
            for worker in workers:
                for found in DELIVERY.finditer(worker.output()):
                    line = found.group(0)
                    if (worker.klass, line) not in shown:
                        shown.add((worker.klass, line))
                        self.stdout.write(f"  delivered by the {worker.klass} pool: {line}")
            time.sleep(0.1)
        self.stdout.write(self.style.SUCCESS(f"all {expected} deliveries shown"))
