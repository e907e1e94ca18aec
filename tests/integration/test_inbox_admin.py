"""The inbox's admin: items by user, kind and read state, read-only, and a user's inbox as they see it."""

import pytest
from django.test import Client

from notifications.inbox import unread
from notifications.inbox.channel import InboxChannel
from notifications.inbox.models import InboxItem
from tests import inbox_helpers
from tests.inbox_helpers import inbox_message

inbox_settings = inbox_helpers.inbox_settings  # the fixture, found by its name
pytestmark = pytest.mark.django_db(transaction=True)


def test_staff_see_items_filtered_by_state_and_a_users_inbox(inbox_settings, user, staff):
    channel = InboxChannel("inbox")
    channel.send(inbox_message(user.pk, entity_id="q3", payload={"title": "Quarterly report"}))
    channel.send(inbox_message(user.pk, entity_id="old", payload={"title": "Old memo"}))
    InboxItem.objects.filter(entity_id="old").update(read_at="2026-01-01T00:00:00Z")
    unread.refresh(user.pk)
    client = Client()
    client.force_login(staff("viewer", "view_inboxitem"))
    listed = client.get("/admin/sluice_notifications/inboxitem/?state=unread").content.decode()
    assert "Quarterly report" in listed
    assert "Old memo" not in listed
    page = client.get(f"/admin/sluice_notifications/inboxitem/user/{user.pk}/")
    assert page.status_code == 200
    text = page.content.decode()
    assert "1 unread item" in text
    assert "Quarterly report" in text
    assert "Old memo" in text
    assert client.get("/admin/sluice_notifications/inboxitem/add/").status_code == 403
    nobody = Client()
    nobody.force_login(staff("other"))
    assert nobody.get(f"/admin/sluice_notifications/inboxitem/user/{user.pk}/").status_code == 403


def test_the_bell_shows_in_the_projects_admin_pages_with_the_count(inbox_settings, user, staff):
    InboxChannel("inbox").send(inbox_message(user.pk))
    user.is_staff = True
    user.save()
    client = Client()
    client.force_login(user)
    page = client.get("/admin/").content.decode()
    assert 'class="sluice-bell"' in page
    assert 'data-count="1"' in page
    assert "sluice/inbox/bell.js" in page
    assert 'data-unread-url="/api/inbox/unread/"' in page
