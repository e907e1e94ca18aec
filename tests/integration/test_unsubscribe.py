"""The one-click unsubscribe link (RFC 8058): a POST of List-Unsubscribe=One-Click with no session turns the token's
kinds off on its channel at once (200, no redirect) through the preference API, so the next notify() sees it; a GET
changes nothing; a changed, forged, foreign, expired or mandatory token is a 4xx that changes nothing."""

import time

import pytest
from django.core import signing
from django.test import Client

from notifications import Outcome, notify
from notifications import unsubscribe_links as links
from notifications.models import Preference

ONE_CLICK = {"List-Unsubscribe": "One-Click"}
KINDS = {
    "task.comment": {"class": "routine", "channels": ["email"]},
    "task.assigned": {"class": "routine", "channels": ["email", "push"], "category": "tasks"},
    "login.code": {"class": "critical", "channels": ["email"], "mandatory": True},
}

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def kinds(settings, redis_client, locmem_channels):
    settings.SLUICE_KINDS = KINDS
    settings.SLUICE_SITE_URL = "https://app.example.com"


def path(user, channel="email", scopes=(("task.comment", ""),)):
    return links.url(user.pk, channel, scopes).removeprefix("https://app.example.com")


def rows(user):
    return sorted(Preference.objects.filter(user=user).values_list("kind", "category", "channel", "mode"))


def test_one_click_turns_the_kind_off_with_no_session_and_the_next_notify_sees_it(kinds, user):
    assert notify(user, "task.comment", entity_id="t1") == Outcome.ACCEPTED
    response = Client().post(path(user), ONE_CLICK)  # no cookie, no CSRF token: the token authenticates
    assert response.status_code == 200  # no redirect: a mail client's POST takes a 200
    assert "You are unsubscribed" in response.content.decode()
    assert rows(user) == [("task.comment", "", "email", "off")]
    assert notify(user, "task.comment", entity_id="t1") == Outcome.SUPPRESSED  # the Redis mirror follows
    assert Client().post(path(user), ONE_CLICK).status_code == 200  # again: the same, nothing more
    assert rows(user) == [("task.comment", "", "email", "off")]


def test_a_get_only_asks_and_changes_nothing(kinds, user):
    response = Client().get(path(user))
    page = response.content.decode()
    assert response.status_code == 200
    assert "Unsubscribe?" in page
    assert '<input type="hidden" name="List-Unsubscribe" value="One-Click">' in page
    assert 'href="/api/pages/preferences/"' in page
    assert "Task comment" in page  # what it turns off, by the kind's title
    assert Client().head(path(user)).status_code == 200
    assert rows(user) == []
    assert notify(user, "task.comment", entity_id="t1") == Outcome.ACCEPTED


def test_a_digests_link_turns_each_of_its_kinds_off_and_leaves_other_channels(kinds, user):
    scopes = [("task.comment", ""), ("task.assigned", "")]
    assert Client().post(path(user, scopes=scopes), ONE_CLICK).status_code == 200
    assert rows(user) == [("task.assigned", "", "email", "off"), ("task.comment", "", "email", "off")]
    # task.assigned still goes by push: only email was turned off.
    assert notify(user, "task.assigned", entity_id="t2") == Outcome.ACCEPTED


def test_a_post_without_the_one_click_body_changes_nothing(kinds, user):
    response = Client().post(path(user), {"List-Unsubscribe": "yes"})
    assert response.status_code == 400
    assert Client().post(path(user)).status_code == 400
    assert rows(user) == []


def changed_by_one_character(token):
    middle = len(token) // 2
    return token[:middle] + ("A" if token[middle] != "A" else "B") + token[middle + 1 :]


def test_a_changed_forged_or_foreign_token_is_refused_and_changes_nothing(kinds, user, django_user_model):
    other = django_user_model.objects.create_user("bob", email="bob@example.com")
    token = path(user).removeprefix("/api/u/").rstrip("/")
    theirs = path(other).removeprefix("/api/u/").rstrip("/")
    forged = theirs.split(":")[0] + ":" + ":".join(token.split(":")[1:])  # bob's payload, ada's signature
    foreign = signing.dumps({"u": user.pk, "c": "email", "s": [["task.comment", ""]]}, salt="another.purpose")
    for bad in (changed_by_one_character(token), forged, foreign, "nonsense", "x" * 5000):
        for method in ("get", "post"):
            response = getattr(Client(), method)(f"/api/u/{bad}/", ONE_CLICK)
            assert response.status_code == 400, (bad, method)
            assert "This link does not work" in response.content.decode()
    assert rows(user) == []
    assert rows(other) == []


def test_a_signed_in_user_posting_someone_elses_link_changes_only_the_links_user(kinds, user, django_user_model):
    other = django_user_model.objects.create_user("bob", email="bob@example.com")
    signed_in = Client()
    signed_in.force_login(other)
    assert signed_in.post(path(user), ONE_CLICK).status_code == 200
    assert rows(user) == [("task.comment", "", "email", "off")]
    assert rows(other) == []


def test_a_token_of_a_mandatory_kind_changes_nothing(kinds, user):
    response = Client().post(path(user, scopes=[("login.code", "")]), ONE_CLICK)
    assert response.status_code == 400
    assert rows(user) == []
    assert notify(user, "login.code", entity_id="c1") == Outcome.ACCEPTED


def test_an_expired_token_is_a_410_that_changes_nothing(kinds, user, settings, monkeypatch):
    settings.SLUICE_EMAIL = {"unsubscribe_max_age_days": 1}
    made = time.time() - 2 * 86400
    monkeypatch.setattr(signing.time, "time", lambda: made)
    old = path(user)
    monkeypatch.undo()
    response = Client().post(old, ONE_CLICK)
    assert response.status_code == 410
    assert "This link has expired" in response.content.decode()
    assert rows(user) == []


def test_a_token_of_a_user_who_is_gone_changes_nothing(kinds, user):
    link = path(user)
    user.delete()
    assert Client().post(link, ONE_CLICK).status_code == 400
    assert not Preference.objects.exists()


def test_other_methods_are_refused(kinds, user):
    assert Client().put(path(user)).status_code == 405
    assert rows(user) == []


def test_each_users_links_spend_from_their_rate_of_changes(kinds, user):
    from notifications.preferences.replace import PUT_BURST, PUT_RATE_PER_S
    from pipeline.gates.token_bucket import take_from
    from pipeline.redis import keys

    assert Client().post(path(user), ONE_CLICK).status_code == 200
    # The rest of the user's burst spent as a PUT spends it (the same bucket), at once: no refill to race with.
    while not take_from(keys.preferences_rate(user.pk), PUT_RATE_PER_S, PUT_BURST):
        pass
    response = Client().post(path(user, scopes=[("task.assigned", "")]), ONE_CLICK)
    assert response.status_code == 429
    assert int(response["Retry-After"]) >= 1
    assert rows(user) == [("task.comment", "", "email", "off")]


def test_an_escalations_link_turns_its_category_off_on_that_channel(kinds, user, settings):
    settings.SLUICE_CHANNELS = {
        "email": {"backend": "notifications.channels.locmem.LocmemChannel"},
        "inbox": {"backend": "notifications.inbox.channel.InboxChannel"},
    }
    escalate = {"after_s": 60, "channels": ["email"]}
    settings.SLUICE_KINDS = {
        "doc.changed": {"class": "routine", "channels": ["inbox"], "category": "docs"} | {"escalate": escalate}
    }
    response = Client().post(path(user, scopes=[("", "docs")]), ONE_CLICK)
    assert response.status_code == 200
    assert "every “Docs” notification" in response.content.decode()
    assert rows(user) == [("", "docs", "email", "off")]


@pytest.mark.expected_errors("Service Unavailable: /api/u/")
def test_redis_down_is_a_503_and_nothing_is_saved(kinds, user, settings):
    link = path(user)
    settings.SLUICE_REDIS_URL = "redis://127.0.0.1:1/0"  # nothing listens on port 1
    response = Client().post(link, ONE_CLICK)
    assert response.status_code == 503
    assert "Nothing was changed" in response.content.decode()
    assert rows(user) == []
