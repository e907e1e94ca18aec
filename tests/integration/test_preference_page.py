"""The preference page: every kind a user may change by category, each channel instant, digest or off, mandatory
kinds shown as such, quiet hours, time zone and cadence; a form with CSRF that saves through PUT /api/preferences/'s
checks (a refused one saves nothing), keeps the user's choices for categories and every kind, and works without a
script."""

import re

import pytest
from django.test import Client

from notifications import Outcome, notify, preferences
from notifications.models import NotificationSettings, Preference

URL = "/api/pages/preferences/"
KINDS = {
    "task.comment": {"class": "routine", "channels": ["email"], "category": "tasks", "title": "Comments"},
    "task.assigned": {"class": "routine", "channels": ["email", "push"], "category": "tasks"},
    "meeting.reminder": {"class": "critical", "channels": ["push", "email"], "category": "meetings"},
    "login.code": {"class": "critical", "channels": ["email"], "mandatory": True, "title": "Sign-in code"},
    "weekly.summary": {"class": "routine", "channels": ["email"], "default_mode": "digest"},
}

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def page(settings, redis_client, locmem_channels, user):
    settings.SLUICE_KINDS = KINDS
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    return client


def form_of(html):
    """The form's fields as a browser would send them: each select's selected option, each input's value."""
    fields = {}
    for name, options in re.findall(r'<select[^>]*name="([^"]+)"[^>]*>(.*?)</select>', html, re.S):
        # A browser sends the selected option, or the first when none is.
        chosen = re.search(r'<option(?: value="([^"]*)")? selected>([^<]*)', options)
        chosen = chosen or re.search(r'<option(?: value="([^"]*)")?>([^<]*)', options)
        fields[name] = chosen[1] if chosen[1] is not None else chosen[2]
    for name, value in re.findall(r'<input[^>]*name="([^"]+)"[^>]*value="([^"]*)"', html):
        fields[name] = value
    return fields


def test_the_page_lists_each_kind_by_category_with_its_channels_and_the_mandatory_as_such(page):
    response = page.get(URL)
    html = response.content.decode()
    assert response.status_code == 200
    assert html.index("<h2>Meetings</h2>") < html.index("<h2>Tasks</h2>")
    assert "Comments" in html  # titles, never keys
    assert "Task assigned" in html
    assert "task.assigned" not in re.sub(r'name="[^"]*"', "", html)
    fields = form_of(html)
    assert fields["mode:task.assigned:email"] == "instant"
    assert fields["mode:weekly.summary:email"] == "digest"  # the kind's default
    assert "mode:login.code:email" not in fields  # mandatory: no choice
    assert "Always sent: it concerns your account." in html
    # A critical kind never goes into a digest: the page does not offer it.
    reminder = re.search(r'name="mode:meeting.reminder:email"[^>]*>(.*?)</select>', html, re.S)[1]
    assert 'value="digest"' not in reminder
    assert fields["timezone"] == "UTC"
    assert fields["csrfmiddlewaretoken"]


def test_saving_then_reloading_shows_what_was_saved_and_admission_follows(page, user):
    fields = form_of(page.get(URL).content.decode())
    fields |= {"mode:task.comment:email": "off", "mode:task.assigned:push": "digest"}
    fields |= {"timezone": "Europe/Moscow", "quiet_start": "22:00", "quiet_end": "07:00"}
    fields |= {"cadence": "daily", "digest_at": "08:30"}
    response = page.post(URL, fields)
    assert (response.status_code, response["Location"]) == (303, URL + "?saved=1")
    reloaded = page.get(response["Location"]).content.decode()
    assert "Your settings are saved." in reloaded
    again = form_of(reloaded)
    assert again["mode:task.comment:email"] == "off"
    assert again["mode:task.assigned:push"] == "digest"
    assert (again["timezone"], again["quiet_start"], again["quiet_end"]) == ("Europe/Moscow", "22:00", "07:00")
    assert (again["cadence"], again["digest_at"]) == ("daily", "08:30")
    # Only what differs from the kinds' defaults became a row.
    assert sorted(Preference.objects.filter(user=user).values_list("kind", "channel", "mode")) == [
        ("task.assigned", "push", "digest"),
        ("task.comment", "email", "off"),
    ]
    settings_row = NotificationSettings.objects.get(user=user)
    assert (settings_row.timezone, settings_row.cadence) == ("Europe/Moscow", "daily")
    assert notify(user, "task.comment", entity_id="t1") == Outcome.SUPPRESSED  # the mirror was written


def test_a_refused_form_saves_nothing_and_names_the_field(page, user):
    fields = form_of(page.get(URL).content.decode())
    fields |= {"mode:task.comment:email": "off", "mode:meeting.reminder:email": "digest"}  # a forged option
    response = page.post(URL, fields)
    html = response.content.decode()
    assert response.status_code == 400
    assert "Nothing was saved:" in html
    assert "is critical: it is never folded into a digest" in html
    assert form_of(html)["mode:task.comment:email"] == "off"  # the form comes back as it was sent
    fields |= {"mode:meeting.reminder:email": "instant", "quiet_start": "22:00", "quiet_end": ""}
    assert page.post(URL, fields).status_code == 400  # quiet hours need both ends
    assert not Preference.objects.filter(user=user).exists()
    assert not NotificationSettings.objects.filter(user=user).exists()


def test_a_post_without_the_csrf_token_is_refused(page, user):
    fields = form_of(page.get(URL).content.decode())
    del fields["csrfmiddlewaretoken"]
    assert page.post(URL, fields | {"mode:task.comment:email": "off"}).status_code == 403
    assert not Preference.objects.exists()


def test_saving_keeps_category_and_every_kind_choices_and_the_users_own_rows(page, user):
    preferences.set(user, category="tasks", channel="push", mode="off")
    preferences.set(user, kind="task.comment", channel="email", mode="instant")  # strict: their own choice
    preferences.set(user, channel="email", mode="digest")  # every kind by email: a digest
    fields = form_of(page.get(URL).content.decode())
    assert fields["mode:task.assigned:push"] == "off"  # the category row decides it
    assert fields["mode:task.assigned:email"] == "digest"  # the every-kind row
    assert fields["mode:task.comment:email"] == "instant"
    assert page.post(URL, fields).status_code == 303  # saved unchanged
    assert sorted(Preference.objects.filter(user=user).values_list("kind", "category", "channel", "mode")) == [
        ("", "", "email", "digest"),
        ("", "tasks", "push", "off"),
        ("task.comment", "", "email", "instant"),
    ]
    # A kind set back to what the broader choice gives loses its own row; one set against it gets one.
    fields |= {"mode:task.comment:email": "digest", "mode:task.assigned:push": "instant"}
    assert page.post(URL, fields).status_code == 303
    assert sorted(Preference.objects.filter(user=user).values_list("kind", "category", "channel", "mode")) == [
        ("", "", "email", "digest"),
        ("", "tasks", "push", "off"),
        ("task.assigned", "", "push", "instant"),
    ]


def test_nobody_signed_in_goes_to_the_login_page(settings, db):
    settings.LOGIN_URL = "/admin/login/"
    response = Client().get(URL)
    assert response.status_code == 302
    assert response["Location"].startswith("/admin/login/?next=")


def test_the_page_speaks_the_users_language(page, user, settings):
    settings.SLUICE_USER_LANGUAGE = "last_name"
    user.last_name = "ru"
    user.save()
    html = page.get(URL).content.decode()
    assert '<html lang="ru">' in html
    assert "Настройки уведомлений" in html
    assert ">Сводка</option>" in html
