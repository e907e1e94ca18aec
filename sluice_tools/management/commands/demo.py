"""manage.py demo: the product tour. The whole stack locally, a scaled incident replay, then deliveries."""

import json
import os
import re
import secrets
import signal
import sys
import threading
import time

from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from notifications.kinds import all_kinds
from pipeline.conf import CLASSES
from sluice_tools.processes import ManagedProcess, WorkerProcess
from sluice_tools.redis_server import RedisServer, free_port, with_database

CONSOLE = "notifications.channels.console.ConsoleChannel"
# The line ConsoleChannel prints for each send: "[push] critical   meeting.reminder: ..."
# Celery redirects a worker's stdout into its log, so the line can come after a log prefix.
DELIVERY = re.compile(r"\[\w+\] (critical|routine|background) .*")
# Every process the demo starts logs here, and the logs stay after it stops.
LOG_DIR = ".demo/logs"
# The replay runs on this database of the demo's Redis, so Flower and /metrics show only the tour.
REPLAY_DATABASE = 1


def port(preferred):
    """``preferred`` when it is free, else any free port."""
    import socket

    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", preferred))
            return preferred
        except OSError:
            return free_port()


def flower_classes(url):
    """The first class on each distinct Redis of the classes (REDIS_URL_<CLASS>, else ``url``), critical first."""
    from pipeline.redis.addresses import identity

    seen, first = set(), []
    for klass in CLASSES:
        found = identity(os.environ.get(f"REDIS_URL_{klass.upper()}") or url)
        if found not in seen:
            seen.add(found)
            first.append(klass)
    return first


def critical_on(url):
    """Put this process's critical class on the Redis at ``url`` (what REDIS_URL_CRITICAL does at start)."""
    from django.conf import settings

    from pipeline.conf import sluice_settings
    from pipeline.connections import reset

    queues = dict(settings.SLUICE_QUEUES)
    queues["critical"] = {**queues.get("critical", {}), "redis_url": url}
    settings.SLUICE_QUEUES = queues
    sluice_settings.cache_clear()
    reset()


class Command(BaseCommand):
    help = "Run the whole stack locally, replay a scaled incident, deliver one of each kind; stay up until Ctrl-C."

    def add_arguments(self, parser):
        parser.add_argument("--exit", action="store_true", help="stop everything once the tour is done")
        parser.add_argument("--scale", type=float, default=0.1, help="size of the incident replay (0 to skip it)")
        parser.add_argument("--timeout", type=float, default=60, help="seconds to wait for the deliveries")
        parser.add_argument(
            "--cluster",
            action="store_true",
            help="put the critical class on a Redis Cluster of 3 primaries and 3 replicas started on loopback",
        )

    def handle(self, exit, scale, timeout, cluster, **options):
        started = []
        os.environ["SLUICE_LOG_DIR"] = os.path.abspath(LOG_DIR)
        try:
            url = self._redis(started)
            self.cluster = cluster
            cluster_url = self._cluster(started) if cluster else None
            call_command("migrate", interactive=False, verbosity=0)
            self.stdout.write("database migrated")
            password = secrets.token_urlsafe(9)
            self._admin_user(password)
            self._fill_inbox()
            urls = self._services(url, password, started)
            if scale > 0:
                self._replay(url, scale)
            if cluster_url:
                critical_on(cluster_url)  # after the replay, which ran on one Redis
            workers = self._pools(url, started)
            self._send_one_of_each()
            self._show_deliveries(workers, timeout)
            self._show_urls(urls, password, url)
            if not exit:
                self.stdout.write("everything stays up until Ctrl-C")
                stop = threading.Event()
                signal.signal(signal.SIGTERM, lambda *_: stop.set())
                try:
                    stop.wait()
                except KeyboardInterrupt:
                    pass
        finally:
            for process in reversed(started):
                process.stop()
            self.stdout.write(f"stopped everything the demo started; its logs stay in {LOG_DIR}")

    def _redis(self, started):
        from sluice_tools.redis_target import use_redis

        url = os.environ.get("REDIS_URL")
        if not url:
            server = RedisServer().start()
            started.append(server)
            url = server.url
            self.stdout.write(f"started a private redis-server at {url}")
        else:
            self.stdout.write(f"using REDIS_URL {url}")
        os.environ["REDIS_URL"] = url
        use_redis(url)
        return url

    def _cluster(self, started):
        """A Redis Cluster for the critical class; every process the demo starts reads it from REDIS_URL_CRITICAL."""
        from sluice_tools.redis_cluster import RedisCluster, cluster_support

        reason = cluster_support()
        if reason:
            raise CommandError(f"--cluster needs redis-server and redis-cli: {reason}")
        found = RedisCluster().start()
        started.append(found)
        os.environ["REDIS_URL_CRITICAL"] = found.url
        self.stdout.write(f"started a Redis Cluster of 3 primaries and 3 replicas at {found.url}: critical's")
        return found.url

    def _admin_user(self, password):
        User = get_user_model()
        admin, _ = User.objects.get_or_create(username="admin", defaults={"email": "admin@example.com"})
        admin.is_staff = admin.is_superuser = True
        admin.set_password(password)
        admin.save()

    def _fill_inbox(self):
        """A few items in the admin's inbox, so the bell in the admin's pages has something to show: twenty
        comments on one task fold into one item."""
        import uuid

        from notifications.channels.base import Message
        from notifications.inbox.channel import InboxChannel

        admin = get_user_model().objects.get(username="admin")
        events = [("task.comment", "task-7", "Quarterly report")] * 20 + [
            ("task.assigned", "task-8", "Budget review"),
            ("meeting.invitation", "meeting-3", "Planning, Monday 10:00"),
        ]
        channel = InboxChannel("inbox")
        for kind, entity, title in events:
            channel.send(
                Message(uuid.uuid4().hex, "inbox", kind, "", admin.pk, entity, "", "", payload={"title": title})
            )
        self.stdout.write(f"{len(events)} events in the admin's inbox (the bell in the admin's pages)")

    def _services(self, url, password, started):
        """The web admin, beat, the exporter and Flower (with basic auth)."""
        python = sys.executable
        web, exporter, flower = port(8000), port(9808), port(5555)
        env = {"REDIS_URL": url, "FLOWER_BASIC_AUTH": f"admin:{password}"}
        services = [
            ManagedProcess(
                "web",
                [python, "manage.py", "runserver", "--noreload", "--insecure", f"127.0.0.1:{web}"],
                # Plain HTTP on loopback: the admin's cookies cannot be Secure-only here.
                {**env, "DJANGO_SECURE_COOKIES": "0"},
                ready_text="Quit the server",
            ),
            ManagedProcess(
                "beat",
                [python, "-m", "celery", "-A", "pipeline", "beat", "--loglevel", "INFO"],
                env,
                ready_text="beat: Starting",
            ),
            ManagedProcess(
                "exporter",
                [
                    python,
                    "manage.py",
                    "pipeline_exporter",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(exporter),
                    "--sample-every",
                    "2",
                ],
                env,
                ready_text="exporter on",
            ),
        ]
        # Flower sees one broker: one per distinct Redis of the classes, each on its first class's.
        flowers = {}
        for klass in flower_classes(url):
            at = flower if not flowers else port(flower + len(flowers))
            flowers[klass] = f"http://127.0.0.1:{at}/"
            argv = [python, "manage.py", "flower", "--class", klass, "--address=127.0.0.1", f"--port={at}"]
            name = "flower" if klass == "critical" else f"flower-{klass}"
            services.append(ManagedProcess(name, argv, env, ready_text="Visit me at"))
        for service in services:
            started.append(service.start())
            self.stdout.write(f"{service.name} running")
        return {
            "admin": f"http://127.0.0.1:{web}/admin/",
            "pages": f"http://127.0.0.1:{web}/api/pages/",
            "flowers": flowers,
            "metrics": f"http://127.0.0.1:{exporter}/metrics",
            "scaler": f"http://127.0.0.1:{exporter}/scaler/critical",
        }

    def _replay(self, url, scale):
        from sluice_tools.bench import incident_run
        from sluice_tools.redis_target import use_redis

        replay_url = with_database(url, REPLAY_DATABASE)
        self.stdout.write(self.style.MIGRATE_HEADING(f"Replaying the incident at scale {scale} on {replay_url}"))
        use_redis(replay_url)
        try:
            result = incident_run.run(replay_url, scale, ".demo/bench", None, self.stdout)
        finally:
            use_redis(url)
        self.stdout.write(open(".demo/bench/bench.md").read())
        self.stdout.write(f"plot: {os.path.abspath('.demo/bench/bench.png')}")
        self.replay = result

    def _pools(self, url, started):
        channels = {name: {"backend": CONSOLE} for name in ("email", "sms", "push")}
        workers = [WorkerProcess(k, url, env={"SLUICE_CHANNELS": json.dumps(channels)}) for k in CLASSES]
        for worker in workers:
            started.append(worker.start())
            self.stdout.write(f"{worker.klass} pool ready")
        return workers

    def _send_one_of_each(self):
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
                logs = "\n".join(f"--- {w.klass} pool ---\n{w.output()[-2000:]}" for w in workers)
                raise CommandError(f"only {len(shown)} of {expected} deliveries arrived in {timeout:.0f}s\n{logs}")
            for worker in workers:
                for found in DELIVERY.finditer(worker.output()):
                    line = found.group(0)
                    if (worker.klass, line) not in shown:
                        shown.add((worker.klass, line))
                        self.stdout.write(f"  delivered by the {worker.klass} pool: {line}")
            time.sleep(0.1)
        self.stdout.write(self.style.SUCCESS(f"all {expected} deliveries shown"))

    def _show_urls(self, urls, password, redis_url):
        self.stdout.write(self.style.SUCCESS("The stack is up:"))
        self.stdout.write(f"  admin    {urls['admin']}  (admin / {password})")
        self.stdout.write(f"  pages    {urls['pages']}inbox/ and {urls['pages']}preferences/  (signed in as admin)")
        for klass, flower in urls["flowers"].items():
            self.stdout.write(f"  Flower   {flower}  (admin / {password}; the workers on {klass}'s Redis)")
        self.stdout.write(f"  metrics  {urls['metrics']}")
        self.stdout.write(f"  KEDA     {urls['scaler']}")
        self.stdout.write(f"  Redis    {redis_url}")
        cluster = os.environ.get("REDIS_URL_CRITICAL", "") if self.cluster else ""
        if cluster:
            self.stdout.write(f"  critical {cluster}  (a Redis Cluster: 3 primaries, 3 replicas)")
        self.stdout.write(f"  logs     {os.environ['SLUICE_LOG_DIR']}  (every process's log; kept after the stop)")
        self.stdout.write("A shell on this stack (notify() from it reaches these workers):")
        prefix = f"REDIS_URL_CRITICAL={cluster} " if cluster else ""
        self.stdout.write(f"  {prefix}DJANGO_DEBUG=1 REDIS_URL={redis_url} {sys.executable} manage.py shell")
