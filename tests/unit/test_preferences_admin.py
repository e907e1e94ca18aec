"""A preference added on a user's admin page saves what the page shows, and the user's next events obey it."""

import re

import pytest

from notifications import Outcome, notify
from notifications.models import Preference
from tests.admin_forms import form_fields, with_fields

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def admin_client(client, django_user_model):
    client.force_login(django_user_model.objects.create_superuser("root", password="pw"))
    return client


def add_inline_row(page, prefix="notification_preferences", **row):
    """What "Add another Digest preference" then "Save" sends: one new row at its defaults, plus ``row``."""
    fields = form_fields(page, "user_form")
    total = int(dict(fields)[f"{prefix}-TOTAL_FORMS"])
    new = {f"{prefix}-{total}-{name}": value for name, value in row.items()}
    return with_fields(fields, **{f"{prefix}-TOTAL_FORMS": str(total + 1)}, **new)


def test_a_new_row_left_at_its_defaults_saves_and_the_user_is_deferred_not_folded(
    admin_client, user, redis_client, settings
):
    url = f"/admin/auth/user/{user.pk}/change/"
    page = admin_client.get(url).content.decode()
    # The row "Add another" clones starts at: every kind, every channel, instant.
    default_row = r'<select name="notification_preferences-__prefix__-mode"[^>]*>\s*<option value="instant" selected>'
    assert re.search(default_row, page)
    data = add_inline_row(page, kind="", category="", channel="", mode="instant")
    response = admin_client.post(url, data)
    assert response.status_code == 302, response.content.decode()[-2000:]
    assert Preference.objects.filter(user=user, kind="", category="", channel="", mode="instant").exists()

    settings.SLUICE_QUEUES = {"routine": {"capacity": 1}}
    assert notify(user, "task.comment", entity_id="t-1") is Outcome.ACCEPTED  # the queue is now full
    assert notify(user, "task.comment", entity_id="t-1") is Outcome.DEFERRED


def test_the_kind_is_a_choice_of_registered_kinds(admin_client, user, redis_client):
    url = f"/admin/auth/user/{user.pk}/change/"
    page = admin_client.get(url).content.decode()
    assert '<option value="task.comment">task.comment</option>' in page
    response = admin_client.post(url, add_inline_row(page, kind="task.comentt", mode="instant"))
    assert response.status_code == 200
    assert "Select a valid choice" in response.content.decode()
    assert not Preference.objects.exists()


def test_the_model_refuses_an_unregistered_kind(user):
    from django.core.exceptions import ValidationError

    with pytest.raises(ValidationError, match="not a registered kind"):
        Preference(user=user, kind="task.comentt", mode="off").full_clean()
