"""The inbox's items (issue 30), and beat's two inbox tasks: escalate every 10 s, prune every hour.

Their task names start with "sluice.", so Sluice's own beat runs them (pipeline.beat.SluiceScheduler); both are
ordinary django-celery-beat PeriodicTasks, editable in the admin.
"""

import json

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


SCHEDULE = [
    ("sluice: inbox escalations", "sluice.inbox.escalate", 10),
    ("sluice: inbox prune", "sluice.inbox.prune", 3600),
]


def create(apps, schema_editor):
    IntervalSchedule = apps.get_model("django_celery_beat", "IntervalSchedule")
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    for name, task, every in SCHEDULE:
        interval, _ = IntervalSchedule.objects.get_or_create(every=every, period="seconds")
        PeriodicTask.objects.update_or_create(
            name=name, defaults={"task": task, "interval": interval, "kwargs": json.dumps({}), "enabled": True}
        )


def remove(apps, schema_editor):
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    PeriodicTask.objects.filter(name__in=[name for name, *_ in SCHEDULE]).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("sluice_notifications", "0006_delivery_recipient_from_send"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="InboxItem",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("kind", models.CharField(max_length=100)),
                ("entity_id", models.CharField(blank=True, max_length=200)),
                ("title", models.CharField(max_length=300)),
                ("body", models.TextField(blank=True)),
                ("url", models.CharField(blank=True, max_length=500)),
                ("payload", models.JSONField(blank=True, default=dict)),
                ("count", models.PositiveIntegerField(default=1)),
                ("last_notification", models.CharField(blank=True, max_length=100)),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                ("updated_at", models.DateTimeField(auto_now=True, db_index=True)),
                ("read_at", models.DateTimeField(blank=True, null=True)),
                ("archived_at", models.DateTimeField(blank=True, null=True)),
                ("escalated_at", models.DateTimeField(blank=True, null=True)),
                (
                    "user",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="sluice_inbox_items",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={
                "verbose_name": "inbox item",
                "ordering": ["-id"],
                "indexes": [models.Index(fields=["user", "read_at", "archived_at"], name="sluice_inbox_user_unread")],
                "constraints": [
                    models.UniqueConstraint(
                        condition=models.Q(("archived_at__isnull", True), ("read_at__isnull", True)),
                        fields=("user", "kind", "entity_id"),
                        name="sluice_inbox_one_unread",
                    )
                ],
            },
        ),
        migrations.RunPython(create, remove),
    ]
