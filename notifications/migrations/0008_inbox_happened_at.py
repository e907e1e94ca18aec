"""An inbox item records when the event whose payload it shows happened (issue 35): a fold keeps the newest event's
payload by that time, whatever order the writes land in. Existing items take the time their payload was written."""

from django.db import migrations, models
from django.db.models import F


def backfill(apps, schema_editor):
    InboxItem = apps.get_model("sluice_notifications", "InboxItem")
    InboxItem.objects.filter(happened_at__isnull=True).update(happened_at=F("updated_at"))


class Migration(migrations.Migration):
    dependencies = [("sluice_notifications", "0007_inbox")]

    operations = [
        migrations.AddField(
            model_name="inboxitem", name="happened_at", field=models.DateTimeField(blank=True, null=True)
        ),
        migrations.RunPython(backfill, migrations.RunPython.noop),
    ]
