"""The inbox API: the signed-in user's list, unread count (from Redis, with an ETag, no database query of Sluice's
own), mark read, archive; session auth, CSRF, bounded input."""

import json

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from notifications.inbox.channel import InboxChannel
from notifications.inbox.models import InboxItem
from tests import inbox_helpers
from tests.inbox_helpers import inbox_message

inbox_settings = inbox_helpers.inbox_settings  # the fixture, found by its name
pytestmark = pytest.mark.django_db(transaction=True)


def send(user, entity_id, kind="doc.changed"):
    InboxChannel("inbox").send(inbox_message(user.pk, kind=kind, entity_id=entity_id))


@pytest.fixture
def signed_in(inbox_settings, user):
    client = Client()
    client.force_login(user)
    return client


def post(client, path, body):
    return client.post(path, json.dumps(body), content_type="application/json")


def test_the_unread_count_has_an_etag_and_answers_304_until_it_changes(signed_in, user):
    send(user, "a")
    first = signed_in.get("/api/inbox/unread/")
    assert first.status_code == 200
    assert first.json() == {"unread": 1}
    etag = first["ETag"]
    assert signed_in.get("/api/inbox/unread/", HTTP_IF_NONE_MATCH=etag).status_code == 304
    send(user, "b")
    second = signed_in.get("/api/inbox/unread/", HTTP_IF_NONE_MATCH=etag)
    assert second.status_code == 200
    assert second.json() == {"unread": 2}
    assert second["ETag"] != etag


def test_a_poll_makes_no_database_query_of_sluices_own(signed_in, user):
    send(user, "a")
    signed_in.get("/api/inbox/unread/")  # the count is in Redis from the send already; this warms nothing
    with CaptureQueriesContext(connection) as queries:
        for _ in range(5):
            assert signed_in.get("/api/inbox/unread/").json() == {"unread": 1}
    tables = [q["sql"] for q in queries.captured_queries]
    # Only Django's session lookup, one per poll: never the user row, never an inbox item.
    assert len(tables) == 5
    assert all('"django_session"' in sql for sql in tables), tables


def test_with_a_cached_session_backend_a_poll_makes_no_query_at_all(inbox_settings, user, settings):
    settings.SESSION_ENGINE = "django.contrib.sessions.backends.cache"
    client = Client()
    client.force_login(user)
    send(user, "a")
    with CaptureQueriesContext(connection) as queries:
        for _ in range(5):
            assert client.get("/api/inbox/unread/").json() == {"unread": 1}
    assert queries.captured_queries == []


def test_list_read_archive_and_the_count_follow(signed_in, user, django_user_model):
    other = django_user_model.objects.create_user("bob")
    for entity in ("a", "b", "c"):
        send(user, entity)
    send(user, "s", kind="doc.shared")
    send(other, "a")
    listed = signed_in.get("/api/inbox/?limit=2").json()
    assert [item["entity_id"] for item in listed["items"]] == ["s", "c"]
    assert listed["unread"] == 4
    rest = signed_in.get(f"/api/inbox/?limit=2&before={listed['next']}").json()
    assert [item["entity_id"] for item in rest["items"]] == ["b", "a"]
    assert rest["next"] is None
    by_kind = signed_in.get("/api/inbox/?kind=doc.shared").json()
    assert [item["entity_id"] for item in by_kind["items"]] == ["s"]

    a = InboxItem.objects.get(user=user, entity_id="a")
    assert post(signed_in, "/api/inbox/read/", {"ids": [a.pk]}).json() == {"changed": 1, "unread": 3}
    assert [i["entity_id"] for i in signed_in.get("/api/inbox/?unread=1").json()["items"]] == ["s", "c", "b"]
    c = InboxItem.objects.get(user=user, entity_id="c")
    assert post(signed_in, "/api/inbox/archive/", {"ids": [c.pk]}).json() == {"changed": 1, "unread": 2}
    # "Mark all read" up to the newest item the page showed; bob's item is not the user's to touch.
    newest = signed_in.get("/api/inbox/").json()["items"][0]["id"]
    assert post(signed_in, "/api/inbox/read/", {"up_to": newest}).json() == {"changed": 2, "unread": 0}
    assert signed_in.get("/api/inbox/unread/").json() == {"unread": 0}
    assert InboxItem.objects.get(user=other).read_at is None


def test_signed_out_bad_input_and_csrf(inbox_settings, user):
    anonymous = Client()
    assert anonymous.get("/api/inbox/unread/").status_code == 401
    assert anonymous.get("/api/inbox/").status_code == 401
    assert post(anonymous, "/api/inbox/read/", {"ids": [1]}).status_code == 401
    client = Client()
    client.force_login(user)
    assert post(client, "/api/inbox/read/", {"ids": []}).json()["field"] == "ids"
    assert post(client, "/api/inbox/read/", {"ids": ["x"]}).json()["field"] == "ids[0]"
    assert post(client, "/api/inbox/read/", {"ids": list(range(1, 300))}).status_code == 400
    assert post(client, "/api/inbox/archive/", {"up_to": 3}).status_code == 400
    assert client.get("/api/inbox/?limit=1000").json()["field"] == "limit"
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(user)
    assert post(strict, "/api/inbox/read/", {"ids": [1]}).status_code == 403


def test_opening_an_item_marks_it_read_and_redirects_to_its_own_link(signed_in, user, django_user_model):
    from notifications.inbox import unread

    send(user, "q3")
    send(user, "memo", kind="doc.shared")  # a kind without a url: its item has no link
    item = InboxItem.objects.get(entity_id="q3")
    assert item.url == "/docs/q3/"
    # The target is the item's own stored link, whatever the request names.
    opened = signed_in.get(f"/api/inbox/{item.pk}/open/?next=https://evil.example/&url=//evil.example")
    assert (opened.status_code, opened["Location"]) == (302, "/docs/q3/")
    item.refresh_from_db()
    assert item.read_at is not None
    assert unread.read(user.pk)[0] == 1  # the page it lands on counts it read already
    again = signed_in.get(f"/api/inbox/{item.pk}/open/")
    assert (again.status_code, again["Location"]) == (302, "/docs/q3/")  # a read item still opens
    memo = InboxItem.objects.get(entity_id="memo")
    assert signed_in.get(f"/api/inbox/{memo.pk}/open/").status_code == 404
    assert InboxItem.objects.get(pk=memo.pk).read_at is None


def test_opening_is_for_the_items_own_user_and_never_a_link_to_another_host(signed_in, user, django_user_model):
    bob = django_user_model.objects.create_user("bob")
    send(bob, "q3")
    bobs = InboxItem.objects.get(user=bob)
    assert signed_in.get(f"/api/inbox/{bobs.pk}/open/").status_code == 404
    assert InboxItem.objects.get(pk=bobs.pk).read_at is None
    send(user, "q3")
    mine = InboxItem.objects.get(user=user)
    for stored in ("//evil.example/x", "/\\evil.example/x", "javascript:alert(1)"):
        InboxItem.objects.filter(pk=mine.pk).update(url=stored)  # never made by a kind's url: refused all the same
        assert signed_in.get(f"/api/inbox/{mine.pk}/open/").status_code == 404, stored
    assert Client().get(f"/api/inbox/{mine.pk}/open/").status_code == 401
    assert post(signed_in, f"/api/inbox/{mine.pk}/open/", {}).status_code == 405
