"""The inbox page: the user's whole inbox, newest first, 20 to a page, an unread filter, and forms (with CSRF) that
mark an item read, archive it, or mark all read up to the newest shown, within the user's rate of changes; times in
the user's zone and language."""

import re

import pytest
from django.test import Client

from notifications.inbox.channel import InboxChannel
from notifications.inbox.models import InboxItem
from notifications.inbox.views import CHANGE_BURST, CHANGE_RATE_PER_S
from notifications.models import NotificationSettings
from pipeline.gates.token_bucket import take_from
from pipeline.redis import keys
from tests.inbox_helpers import inbox_message, inbox_settings  # noqa: F401

URL = "/api/pages/inbox/"

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def page(inbox_settings, user):  # noqa: F811
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    return client


def fill(user_id, count, kind="doc.changed"):
    channel = InboxChannel("inbox")
    for n in range(count):
        channel.send(inbox_message(user_id, kind=kind, entity_id=f"d{n}", payload={"title": f"Doc {n}"}))


def titles(html):
    return re.findall(r'class="sluice-item__title"[^>]*>([^<]+)<', html)


def token_of(html):
    return re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', html)[1]


def test_the_page_lists_the_inbox_newest_first_twenty_at_a_time(page, user):
    fill(user.pk, 25)
    first = page.get(URL).content.decode()
    assert len(titles(first)) == 20
    assert titles(first)[0] == "Doc changed: Doc 24"  # newest first, the kind's title, never its key
    assert "25 unread" in first
    assert "Page 1 of 2" in first
    second = page.get(URL + "?page=2").content.decode()
    assert len(titles(second)) == 5
    assert titles(second)[-1] == "Doc changed: Doc 0"
    assert set(titles(first)).isdisjoint(titles(second))
    assert page.get(URL + "?page=99").status_code == 200  # past the end: the last page
    assert 'href="/api/inbox/' in first  # a linked item opens through its open URL, which marks it read


def test_mark_read_archive_and_the_unread_filter(page, user, django_user_model):
    fill(user.pk, 3)
    other = django_user_model.objects.create_user("bob")
    fill(other.pk, 1)
    theirs = InboxItem.objects.get(user=other)
    newest, middle, oldest = InboxItem.objects.filter(user=user).order_by("-pk")
    html = page.get(URL).content.decode()
    token = token_of(html)
    response = page.post(URL, {"csrfmiddlewaretoken": token, "action": "read", "id": middle.pk})
    assert (response.status_code, response["Location"]) == (303, URL)
    response = page.post(URL, {"csrfmiddlewaretoken": token, "action": "archive", "id": oldest.pk, "unread": "1"})
    assert response["Location"] == URL + "?unread=1"  # back to the page it came from, rebuilt
    unread_only = page.get(URL + "?unread=1").content.decode()
    assert len(titles(unread_only)) == 1
    assert len(titles(page.get(URL).content.decode())) == 2  # archived: out of the list
    # Another user's item is never touched.
    page.post(URL, {"csrfmiddlewaretoken": token, "action": "archive", "id": theirs.pk})
    theirs.refresh_from_db()
    assert theirs.archived_at is None
    newest.refresh_from_db()
    assert newest.read_at is None


def test_mark_all_read_marks_up_to_the_newest_shown_never_one_that_came_since(page, user):
    fill(user.pk, 2)
    html = page.get(URL).content.decode()
    up_to = re.search(r'name="up_to" value="(\d+)"', html)[1]
    fill(user.pk, 1, kind="doc.shared")  # arrives after the page was shown
    page.post(URL, {"csrfmiddlewaretoken": token_of(html), "action": "read_all", "up_to": up_to})
    assert list(InboxItem.objects.filter(user=user, read_at__isnull=True).values_list("kind", flat=True)) == [
        "doc.shared"
    ]


def test_a_post_needs_its_csrf_token_and_an_item(page, user):
    fill(user.pk, 1)
    item = InboxItem.objects.get(user=user)
    assert page.post(URL, {"action": "read", "id": item.pk}).status_code == 403
    token = token_of(page.get(URL).content.decode())
    assert page.post(URL, {"csrfmiddlewaretoken": token, "action": "read", "id": "x"}).status_code == 400
    assert page.post(URL, {"csrfmiddlewaretoken": token, "action": "delete", "id": item.pk}).status_code == 400
    item.refresh_from_db()
    assert item.read_at is None


def test_changes_spend_from_the_same_rate_as_the_api(page, user):
    fill(user.pk, 1)
    item = InboxItem.objects.get(user=user)
    token = token_of(page.get(URL).content.decode())
    assert page.post(URL, {"csrfmiddlewaretoken": token, "action": "read", "id": item.pk}).status_code == 303
    # The rest of the burst spent as the API spends it (the same bucket), at once: no refill to race with.
    while not take_from(keys.inbox_rate(user.pk), CHANGE_RATE_PER_S, CHANGE_BURST):
        pass
    response = page.post(URL, {"csrfmiddlewaretoken": token, "action": "archive", "id": item.pk})
    assert response.status_code == 429
    assert int(response["Retry-After"]) >= 1
    assert "Too many changes at once" in response.content.decode()
    item.refresh_from_db()
    assert item.archived_at is None


def test_times_show_in_the_users_zone_and_language(page, user, settings):
    settings.SLUICE_USER_LANGUAGE = "last_name"
    user.last_name = "ru"
    user.save()
    NotificationSettings.objects.create(user=user, timezone="Europe/Moscow")
    message = inbox_message(user.pk, payload={"title": "Отчёт"})
    InboxChannel("inbox").send(message.__class__(**{**message.__dict__, "happened_at": 1767265500.0}))
    html = page.get(URL).content.decode()
    assert "1 января 2026 г. 14:05" in html  # 11:05 UTC, in Moscow
    assert "1 непрочитанное" in html
    assert ">В архив</button>" in html


def test_nobody_signed_in_goes_to_the_login_page(inbox_settings, settings):  # noqa: F811
    settings.LOGIN_URL = "/admin/login/"
    assert Client().get(URL).status_code == 302
