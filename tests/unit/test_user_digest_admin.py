"""Admin: a user's settings page previews their pending digest as the next flush would send it, with its due time."""

import pytest

from notifications.models import NotificationSettings
from pipeline.redis import keys
from tests.digest_helpers import fold

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_users_settings_page_previews_their_pending_digest(client, staff, redis_client, django_user_model):
    client.force_login(staff("viewer", "view_notificationsettings"))
    user = django_user_model.objects.create_user("dora", email="dora@example.com", first_name="Dora")
    other = django_user_model.objects.create_user("otto")
    row = NotificationSettings.objects.create(user=user)
    for entity, count in (("a", 2), ("b", 1)):
        for _ in range(count):
            fold(user.pk, entity_id=entity, payload={"title": f"Task {entity.upper()}"})
    fold(other.pk, entity_id="not-hers", payload={"title": "Otto's task"})
    redis_client.zadd(keys.pending(), {keys.fold_member(user.pk, "task.comment", "b"): 4_000_000_000}, xx=True)
    page = client.get(f"/admin/sluice_notifications/notificationsettings/{row.pk}/change/").content.decode()
    assert "Pending digest" in page
    assert "3 updates in your digest" in page
    assert "Task A: 2 updates" in page
    assert "Hi Dora," in page
    assert "Otto" not in page
    assert "Next due: " in page


def test_nothing_pending_says_so(client, staff, redis_client, django_user_model):
    client.force_login(staff("viewer", "view_notificationsettings"))
    row = NotificationSettings.objects.create(user=django_user_model.objects.create_user("erin"))
    page = client.get(f"/admin/sluice_notifications/notificationsettings/{row.pk}/change/").content.decode()
    assert "Nothing pending." in page
