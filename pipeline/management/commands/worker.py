"""manage.py worker critical|routine|background: a Celery worker for one class, with its profile."""

import argparse

from django.core.management.base import BaseCommand

from pipeline.broker.profiles import PROFILES, worker_argv
from pipeline.celery import get_app
from pipeline.conf import CLASSES


class Command(BaseCommand):
    help = "Start a Celery worker consuming one class's queue with that class's profile."

    def add_arguments(self, parser):
        parser.add_argument("klass", choices=CLASSES, help="the class whose queue this worker consumes")
        parser.add_argument(
            "celery_args", nargs=argparse.REMAINDER, help="extra celery worker options; they override the profile"
        )

    def handle(self, klass, celery_args, **options):
        self.stdout.write(f"{klass} worker: {PROFILES[klass].why}")
        status = run_celery(worker_argv(klass, celery_args))
        if status:
            raise SystemExit(status)


def run_celery(argv):
    """Run the celery command line on Sluice's app and return its exit status.

    app.worker_main() and app.start() drop the status (celery#7358): a worker that died of an
    unrecoverable error would exit 0, and a supervisor could take that for a clean stop.
    """
    from celery.bin.celery import celery

    celery.params[0].default = get_app()  # what app.start() does: the --app option defaults to this app
    try:
        return celery.main(args=argv, standalone_mode=False)
    finally:
        celery.params[0].default = None
