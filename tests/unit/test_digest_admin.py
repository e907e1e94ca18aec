"""Admin: preferences are searchable and filterable, bulk actions validate and mirror, only permitted staff may
edit, and the changelist shows the digest's state."""

import pytest

from notifications.models import Preference
from pipeline.redis import keys
from tests.digest_helpers import fold

pytestmark = pytest.mark.django_db(transaction=True)
URL = "/admin/sluice_notifications/preference/"


def test_changelist_shows_the_digest_state_search_and_filters(client, staff, redis_client, django_user_model):
    client.force_login(staff("viewer", "view_preference"))
    Preference.objects.create(user=django_user_model.objects.create_user("dora", email="dora@example.com"))
    for entity in "abc":
        fold(1, entity_id=entity)
    page = client.get(URL).content.decode()
    assert "Digest state" in page
    assert "Pending keys</th><td>3<" in page
    assert "Due now</th><td>3<" in page
    assert "Fold store</th><td>3 / 40960 keys" in page
    assert "<td>routine</td><td>0</td><td>2048</td>" in page  # the queues' depth and capacity
    assert "dora" in client.get(URL, {"q": "dora@example"}).content.decode()
    assert "dora" not in client.get(URL, {"q": "nobody"}).content.decode()
    assert client.get(URL, {"mode__exact": "instant"}).status_code == 200


def test_held_keys_are_shown_by_reason_with_the_next_due_time(client, staff, redis_client):
    client.force_login(staff("viewer", "view_preference"))
    fold(1, entity_id="a")
    member = keys.fold_member(1, "task.comment", "a")
    redis_client.zadd(keys.pending(), {member: 4_000_000_000})  # held far ahead, as quiet hours do
    redis_client.hset(keys.fold(member), "r", "quiet")
    page = client.get(URL).content.decode()
    assert "Held for later</th><td>1 (quiet 1)" in page


def test_staff_without_change_permission_cannot_edit(client, staff, redis_client, django_user_model):
    row = Preference.objects.create(user=django_user_model.objects.create_user("erin"), mode="instant")
    client.force_login(staff("viewer", "view_preference"))
    response = client.post(f"{URL}{row.pk}/change/", {"user": row.user_id, "mode": "off"})
    assert response.status_code == 403
    client.post(URL, {"action": "make_off", "_selected_action": [row.pk]})
    row.refresh_from_db()
    assert row.mode == "instant"


def test_bulk_action_validates_each_row_and_mirrors_it(client, staff, redis_client, django_user_model, settings):
    settings.SLUICE_KINDS = {
        **settings.SLUICE_KINDS,
        "login.code": {"class": "critical", "channels": ["sms"], "mandatory": True},
    }
    users = [django_user_model.objects.create_user(n) for n in ("f", "g")]
    rows = [
        Preference.objects.create(user=users[0], kind="task.comment", mode="instant"),
        Preference.objects.create(user=users[1], kind="login.code", mode="instant"),
    ]
    client.force_login(staff("editor", "view_preference", "change_preference"))
    response = client.post(URL, {"action": "make_off", "_selected_action": [r.pk for r in rows]}, follow=True)
    assert "1 preferences updated" in response.content.decode()
    assert "mandatory" in response.content.decode()
    assert [r.mode for r in Preference.objects.order_by("pk")] == ["off", "instant"]
    assert redis_client.hget(keys.preferences(users[0].pk), "k:task.comment") == b"||0"


def test_user_admin_can_carry_the_inlines(client, django_user_model, redis_client):
    admin_user = django_user_model.objects.create_superuser("root", password="pw")
    client.force_login(admin_user)
    page = client.get(f"/admin/auth/user/{admin_user.pk}/change/").content.decode()
    assert "notification_preferences-TOTAL_FORMS" in page
    assert "notification_settings-TOTAL_FORMS" in page
