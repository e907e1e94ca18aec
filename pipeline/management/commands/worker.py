"""manage.py worker critical|routine|background: a Celery worker for one class, with its profile."""

import argparse

from django.core.management.base import BaseCommand

from notifications.conf import CLASSES
from pipeline.celery import app
from pipeline.profiles import PROFILES, worker_argv


class Command(BaseCommand):
    help = "Start a Celery worker consuming one class's queue with that class's profile."

    def add_arguments(self, parser):
        parser.add_argument("klass", choices=CLASSES, help="the class whose queue this worker consumes")
        parser.add_argument(
            "celery_args", nargs=argparse.REMAINDER, help="extra celery worker options; they override the profile"
        )

    def handle(self, klass, celery_args, **options):
        self.stdout.write(f"{klass} worker: {PROFILES[klass].why}")
        app.worker_main(argv=worker_argv(klass, celery_args))
