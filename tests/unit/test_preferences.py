"""Preferences: which choice wins, what may not be chosen, the Python API, and GET/PUT /api/preferences/."""

import json

import pytest
from django.core.exceptions import ValidationError
from hypothesis import given, settings
from hypothesis import strategies as st

from notifications import preferences
from notifications.models import NotificationSettings, Preference
from pipeline.conf import sluice_settings
from pipeline.conf.kinds import Kind
from pipeline.redis import keys

URL = "/api/preferences/"
KIND = Kind("task.comment", "routine", ("email", "push"), "", "", category="tasks")
SCOPES = [("task.comment", "", "email"), ("task.comment", "", ""), ("", "tasks", "email"), ("", "tasks", ""),
          ("", "", "email"), ("", "", "")]  # fmt: skip


@settings(max_examples=200, deadline=None)
@given(chosen=st.dictionaries(st.sampled_from(SCOPES), st.sampled_from(["instant", "digest", "off"])))
def test_the_most_specific_choice_wins_then_the_kinds_default(chosen):
    instant, digest, strict = preferences.resolve(KIND, chosen)
    mode_of_email = next((chosen[s] for s in SCOPES if s in chosen), KIND.default_mode)
    assert ("email" in instant, "email" in digest) == (mode_of_email == "instant", mode_of_email == "digest")
    # push has no scope of its own here: kind, category, every kind, in that order.
    push_scopes = [s for s in SCOPES if s[2] == ""]
    mode_of_push = next((chosen[s] for s in push_scopes if s in chosen), KIND.default_mode)
    assert ("push" in instant, "push" in digest) == (mode_of_push == "instant", mode_of_push == "digest")
    assert strict == any(
        mode == "instant" and scope in chosen and chosen[scope] == "instant"
        for channel, mode, scopes in (("email", mode_of_email, SCOPES), ("push", mode_of_push, push_scopes))
        for scope in [next((s for s in scopes if s in chosen), None)]
    )


def test_a_mandatory_kind_ignores_every_choice():
    code = Kind("login.code", "critical", ("sms",), "", "", mandatory=True)
    assert preferences.resolve(code, {("", "", ""): "off", ("login.code", "", ""): "off"}) == (("sms",), (), False)


@pytest.fixture
def kinds(settings):
    settings.SLUICE_KINDS = {
        **settings.SLUICE_KINDS,
        "login.code": {"class": "critical", "channels": ["sms"], "mandatory": True},
        "task.comment": {"class": "routine", "channels": ["email", "push"], "category": "tasks"},
    }


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("choice", "field", "words"),
    [
        ({"kind": "login.code", "mode": "off"}, "mode", "mandatory"),
        ({"kind": "login.code", "mode": "digest"}, "mode", "mandatory"),
        ({"kind": "meeting.reminder", "mode": "digest"}, "mode", "critical"),
        ({"kind": "task.comentt", "mode": "off"}, "kind", "not a registered kind"),
        ({"channel": "fax", "mode": "off"}, "channel", "not a channel"),
        ({"category": "nope", "mode": "off"}, "category", "not a category"),
        ({"kind": "task.comment", "channel": "sms", "mode": "off"}, "channel", "not sent on sms"),
        ({"mode": "loud"}, "mode", "not a mode"),
    ],
)
def test_what_may_not_be_chosen_is_refused_naming_the_field(user, kinds, choice, field, words):
    with pytest.raises(ValidationError) as refused:
        preferences.set(user, **choice)
    assert words in " ".join(refused.value.message_dict[field])
    assert not Preference.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("call", "field", "words"),
    [
        (lambda u: preferences.set_quiet_hours(u, "Mars/Olympus", "22:00", "07:00"), "timezone", "IANA"),
        (lambda u: preferences.set_quiet_hours(u, "UTC", "22:00", "22:00"), "quiet_end", "empty"),
        (lambda u: preferences.set_quiet_hours(u, "UTC", "22:00", None), "quiet_end", "both"),
        (lambda u: preferences.set_quiet_hours(u, "UTC", "25:00", "07:00"), "quiet_start", "time of day"),
        (lambda u: preferences.set_cadence(u, "daily"), "digest_at", "daily cadence"),
        (lambda u: preferences.set_cadence(u, "weekly"), "cadence", "not a valid choice"),
    ],
)
def test_bad_quiet_hours_and_cadence_are_refused_naming_the_field(user, call, field, words):
    with pytest.raises(ValidationError) as refused:
        call(user)
    assert words in " ".join(refused.value.message_dict[field])


@pytest.mark.django_db(transaction=True)
def test_the_api_sets_gets_and_mirrors(user, kinds, redis_client):
    preferences.set(user, category="tasks", mode="digest")
    preferences.set(user, kind="task.comment", channel="push", mode="off")
    preferences.set_quiet_hours(user, "Europe/Berlin", "22:00", "07:00")
    preferences.set_cadence(user, "daily", "08:30")
    got = preferences.get(user)
    assert got["effective"]["task.comment"] == {"instant": [], "digest": ["email"], "off": ["push"]}
    assert got["effective"]["login.code"] == {"instant": ["sms"], "digest": [], "off": []}
    assert got["quiet_hours"] == {"start": "22:00:00", "end": "07:00:00"}
    assert (got["timezone"], got["cadence"], got["digest_at"]) == ("Europe/Berlin", "daily", "08:30:00")
    mirrored = redis_client.hgetall(keys.preferences(user.pk))
    assert mirrored[b"k:task.comment"] == b"|email|0"
    assert len(mirrored[b"q"].split(b",")) >= 8  # a window a night, over the days ahead
    assert len(mirrored[b"c"].split(b",")) == 8
    preferences.set(user, kind="task.comment", channel="push", mode=None)  # forget that one
    assert preferences.get(user)["effective"]["task.comment"]["digest"] == ["email", "push"]


@pytest.fixture
def signed_in(client, user):
    client.force_login(user)
    return client


@pytest.mark.django_db
def test_get_needs_a_session(client):
    response = client.get(URL)
    assert (response.status_code, response.json()["error"]) == (401, "unauthorized")


@pytest.mark.django_db(transaction=True)
def test_put_replaces_everything_and_get_reads_it_back(signed_in, user, kinds, redis_client):
    body = {
        "preferences": [{"kind": "task.comment", "channel": "email", "mode": "off"}, {"mode": "digest"}],
        "timezone": "America/New_York",
        "quiet_hours": {"start": "21:30", "end": "06:45"},
        "cadence": "hourly",
    }
    response = signed_in.put(URL, json.dumps(body), content_type="application/json")
    assert response.status_code == 200, response.content
    got = signed_in.get(URL).json()
    assert got["effective"]["task.comment"] == {"instant": [], "digest": ["push"], "off": ["email"]}
    assert got["effective"]["meeting.reminder"]["instant"] == ["push", "email"]  # critical never folds
    assert (got["timezone"], got["cadence"]) == ("America/New_York", "hourly")
    response = signed_in.put(URL, json.dumps({"preferences": []}), content_type="application/json")
    assert response.json()["preferences"] == []
    assert NotificationSettings.objects.get(user=user).quiet_start is None


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"preferences": [{"kind": "login.code", "mode": "off"}]}, "preferences[0].mode"),
        ({"preferences": [{"mode": "off"}, {"kind": "nope", "mode": "off"}]}, "preferences[1].kind"),
        ({"timezone": "Nowhere/Land"}, "timezone"),
        ({"quiet_hours": {"start": "22:00", "end": "22:00"}}, "quiet_hours.quiet_end"),
        ({"quiet_hours": "22-07"}, "quiet_hours"),
        ({"cadence": "daily"}, "digest_at"),
        ({"colour": "blue"}, "colour"),
    ],
)
def test_bad_input_is_a_400_naming_the_field_and_saves_nothing(signed_in, user, kinds, body, field):
    Preference.objects.create(user=user, mode="instant")
    response = signed_in.put(URL, json.dumps(body), content_type="application/json")
    assert response.status_code == 400
    assert response.json()["field"] == field
    assert list(Preference.objects.values_list("mode", flat=True)) == ["instant"]  # all or nothing


@pytest.mark.django_db
def test_put_needs_the_csrf_token_like_any_session_request(user, kinds):
    from django.test import Client

    browser = Client(enforce_csrf_checks=True)
    browser.force_login(user)
    response = browser.put(URL, json.dumps({"cadence": "hourly"}), content_type="application/json")
    assert response.status_code == 403
    browser.get(URL)  # a page of the host would hand out the token
    token = browser.cookies["csrftoken"].value if "csrftoken" in browser.cookies else None
    if token is None:
        from django.middleware.csrf import _get_new_csrf_string

        token = _get_new_csrf_string()
        browser.cookies["csrftoken"] = token
    response = browser.put(
        URL, json.dumps({"cadence": "hourly"}), content_type="application/json", HTTP_X_CSRFTOKEN=token
    )
    assert response.status_code == 200
    assert sluice_settings().kinds["login.code"].mandatory
