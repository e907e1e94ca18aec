"""Admin: preferences are searchable and filterable, bulk actions work, only permitted staff may edit."""

import pytest

from notifications.models import DigestPreference
from pipeline import keys
from tests.digest_helpers import fold

pytestmark = pytest.mark.django_db(transaction=True)
URL = "/admin/sluice_notifications/digestpreference/"


def test_changelist_shows_the_digest_state_search_and_filters(client, staff, redis_client, django_user_model):
    client.force_login(staff("viewer", "view_digestpreference"))
    DigestPreference.objects.create(user=django_user_model.objects.create_user("dora", email="dora@example.com"))
    for entity in "abc":
        fold(1, entity_id=entity)
    page = client.get(URL).content.decode()
    assert "Digest state" in page
    assert "Pending keys</th><td>3<" in page
    assert "<td>routine</td><td>0</td><td>2048</td>" in page  # the queues' depth and capacity
    assert "dora" in client.get(URL, {"q": "dora@example"}).content.decode()
    assert "dora" not in client.get(URL, {"q": "nobody"}).content.decode()
    assert client.get(URL, {"deliver_separately__exact": "1"}).status_code == 200


def test_staff_without_change_permission_cannot_edit(client, staff, redis_client, django_user_model):
    pref = DigestPreference.objects.create(user=django_user_model.objects.create_user("erin"))
    client.force_login(staff("viewer", "view_digestpreference"))
    response = client.post(f"{URL}{pref.pk}/change/", {"user": pref.user_id, "kind": "", "deliver_separately": ""})
    assert response.status_code == 403
    pref.refresh_from_db()
    assert pref.deliver_separately
    response = client.post(URL, {"action": "allow_digests", "_selected_action": [pref.pk]})
    pref.refresh_from_db()
    assert pref.deliver_separately


def test_bulk_action_updates_rows_and_the_redis_mirror(client, staff, redis_client, django_user_model):
    prefs = [DigestPreference.objects.create(user=django_user_model.objects.create_user(n)) for n in ("f", "g")]
    client.force_login(staff("editor", "view_digestpreference", "change_digestpreference"))
    response = client.post(URL, {"action": "allow_digests", "_selected_action": [p.pk for p in prefs]})
    assert response.status_code == 302
    assert not DigestPreference.objects.filter(deliver_separately=True).exists()
    assert redis_client.scard(keys.optout()) == 0


def test_user_admin_has_the_preferences_inline(client, django_user_model, redis_client):
    admin_user = django_user_model.objects.create_superuser("root", password="pw")
    client.force_login(admin_user)
    page = client.get(f"/admin/auth/user/{admin_user.pk}/change/").content.decode()
    assert "digest_preferences-TOTAL_FORMS" in page
