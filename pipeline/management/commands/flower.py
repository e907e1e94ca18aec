"""manage.py flower: Flower on Sluice's Celery app, with a login, from any working directory.

Flower and `celery inspect` see one broker. With a Redis per class (SLUICE_QUEUES[class]["redis_url"]), run one
Flower per distinct Redis: `--class routine` points this one at routine's Redis (critical's by default).
"""

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError, handle_default_options

from pipeline.broker.flower_auth import refuse_without_auth
from pipeline.management.commands.worker import run_celery


class Command(BaseCommand):
    help = "Start Flower on Sluice's queues; it refuses to start without FLOWER_BASIC_AUTH or --auth."

    def add_arguments(self, parser):
        parser.add_argument(
            "--class",
            dest="klass",
            default=None,
            help="watch this class's Redis (critical, routine or background); default: critical's, the app's broker",
        )

    def run_from_argv(self, argv):
        # Every option Django does not know is Flower's (--port=5555, --basic-auth=..., --url-prefix=...).
        parser = self.create_parser(argv[0], argv[1])
        options, flower_args = parser.parse_known_args(argv[2:])
        handle_default_options(options)
        try:
            self.execute(flower_args=flower_args, **{k: v for k, v in vars(options).items() if k != "args"})
        except CommandError as exc:
            # As BaseCommand.run_from_argv does, which this replaces: one line, not a traceback.
            self.stderr.write(f"CommandError: {exc}")
            raise SystemExit(exc.returncode) from None

    def handle(self, flower_args=(), klass=None, **options):
        try:
            refuse_without_auth(flower_args)
        except ImproperlyConfigured as exc:
            raise CommandError(str(exc)) from exc
        if klass is not None:
            point_at_class(klass)
        status = run_celery(["flower", *flower_args])
        if status:
            raise SystemExit(status)


def point_at_class(klass):
    """Make the app's broker ``klass``'s Redis, so Flower sees that class's workers and events."""
    from pipeline.celery import app, broker_settings
    from pipeline.conf import CLASSES, sluice_settings

    if klass not in CLASSES:
        raise CommandError(f"--class must be one of {', '.join(CLASSES)}, got {klass!r}")
    app.conf.update(broker_settings(sluice_settings().queues[klass].redis_url))
