"""Create the beat schedule of the delivery status records' pruning: every hour, editable in the admin.

Its task name starts with "sluice.", so Sluice's own beat runs it (pipeline.beat.SluiceScheduler).
"""

import json

from django.db import migrations

NAME = "sluice: delivery records prune"
TASK = "sluice.delivery.prune"
EVERY_S = 3600


def create(apps, schema_editor):
    IntervalSchedule = apps.get_model("django_celery_beat", "IntervalSchedule")
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    interval, _ = IntervalSchedule.objects.get_or_create(every=EVERY_S, period="seconds")
    PeriodicTask.objects.update_or_create(
        name=NAME, defaults={"task": TASK, "interval": interval, "kwargs": json.dumps({}), "enabled": True}
    )


def remove(apps, schema_editor):
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    PeriodicTask.objects.filter(name=NAME).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("sluice_notifications", "0003_delivery_suppression_provider"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]

    operations = [migrations.RunPython(create, remove)]
