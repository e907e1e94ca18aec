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


def test_a_user_page_for_no_user_is_a_404_and_makes_no_redis_key(inbox_settings, user, staff, redis_client):
    from pipeline.redis import keys

    client = Client()
    client.force_login(staff("viewer", "view_inboxitem"))
    # Not the user model's pk type ("abc" for an integer pk) was a 500; an id of no user made a 30-day Redis key.
    for user_id in (str(user.pk + 1000), "abc", "99999999999999999999"):
        assert client.get(f"/admin/sluice_notifications/inboxitem/user/{user_id}/").status_code == 404, user_id
        assert not redis_client.exists(keys.inbox_unread(user_id)), user_id
    assert client.get(f"/admin/sluice_notifications/inboxitem/user/{user.pk}/").status_code == 200
    assert redis_client.ttl(keys.inbox_unread(user.pk)) > 0  # a real user's count, counted on demand


def test_deleting_items_in_the_admin_recounts_the_users_unread_count(inbox_settings, user, staff, django_user_model):
    bob = django_user_model.objects.create_user("bob")
    channel = InboxChannel("inbox")
    for owner, entity in [(user, "a"), (user, "b"), (user, "c"), (bob, "a"), (bob, "b")]:
        channel.send(inbox_message(owner.pk, entity_id=entity))
    assert (unread.read(user.pk)[0], unread.read(bob.pk)[0]) == (3, 2)
    client = Client()
    client.force_login(staff("deleter", "view_inboxitem", "delete_inboxitem"))
    one = InboxItem.objects.get(user=user, entity_id="a")
    deleted = client.post(f"/admin/sluice_notifications/inboxitem/{one.pk}/delete/", {"post": "yes"})
    assert deleted.status_code == 302
    assert unread.read(user.pk)[0] == 2
    # The bulk action, across two users.
    chosen = InboxItem.objects.filter(entity_id="b").values_list("pk", flat=True)
    bulk = client.post(
        "/admin/sluice_notifications/inboxitem/",
        {"action": "delete_selected", "_selected_action": [str(pk) for pk in chosen], "post": "yes"},
    )
    assert bulk.status_code == 302
    assert (unread.read(user.pk)[0], unread.read(bob.pk)[0]) == (1, 1)
