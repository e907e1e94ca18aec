"""Create the beat schedule: the digest flush every SLUICE_DIGEST['flush_interval_s'], the overflow drain every 5 s.

Both are ordinary django-celery-beat PeriodicTasks, so they can be edited or paused in the admin.
"""

import json

from django.conf import settings
from django.db import migrations

SCHEDULE = [
    ("sluice: digest flush", "sluice.digest.flush", None, {"trigger": "beat"}),
    ("sluice: overflow drain", "sluice.overflow.drain", 5, {}),
]


def create(apps, schema_editor):
    IntervalSchedule = apps.get_model("django_celery_beat", "IntervalSchedule")
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    flush_every = getattr(settings, "SLUICE_DIGEST", {}).get("flush_interval_s", 60)
    for name, task, every, kwargs in SCHEDULE:
        interval, _ = IntervalSchedule.objects.get_or_create(every=every or flush_every, period="seconds")
        PeriodicTask.objects.update_or_create(
            name=name, defaults={"task": task, "interval": interval, "kwargs": json.dumps(kwargs), "enabled": True}
        )


def remove(apps, schema_editor):
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    PeriodicTask.objects.filter(name__in=[name for name, *_ in SCHEDULE]).delete()


class Migration(migrations.Migration):
    initial = True
    dependencies = [("django_celery_beat", "0019_alter_periodictasks_options")]

    operations = [migrations.RunPython(create, remove)]
