"""The delivery record's recipient is now the address the send went to, written by the worker (issue 24).

It used to be copied from the first ESP event that named one, which anyone able to post such an event chose. A
bounce now suppresses an address only when it equals the record's recipient, so a recipient copied from an event
must not vouch for it: the existing records' recipients are cleared. Bounces of sends recorded before this migration
still move their records, and suppress no one.
"""

from django.db import migrations


def clear_recipients(apps, schema_editor):
    apps.get_model("sluice_notifications", "Delivery").objects.exclude(recipient="").update(recipient="")


class Migration(migrations.Migration):
    dependencies = [("sluice_notifications", "0005_ingest_token_scopes")]

    operations = [migrations.RunPython(clear_recipients, migrations.RunPython.noop)]
