"""Who reads a message: their language (SLUICE_USER_LANGUAGE, else LANGUAGE_CODE) and their time zone, loaded once
and only when used; the zone looked up lazily answers exactly as the zone itself, across the clocks' changes."""

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from django.utils import timezone, translation

from notifications.preferences.models import NotificationSettings
from notifications.reader import Reader, _LazyZone, reading


@pytest.mark.parametrize("zone", ["Europe/Moscow", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe"])
def test_the_lazy_zone_converts_as_the_zone_does_across_a_year(zone):
    real, lazy = ZoneInfo(zone), _LazyZone(lambda: ZoneInfo(zone))
    instant = datetime(2026, 1, 1, tzinfo=UTC)
    while instant < datetime(2027, 1, 1, tzinfo=UTC):  # every 37 minutes: each change of the clocks is passed
        local, ours = instant.astimezone(real), instant.astimezone(lazy)
        assert (ours.replace(tzinfo=None), ours.fold) == (local.replace(tzinfo=None), local.fold), instant
        assert (ours.utcoffset(), ours.tzname(), ours.dst()) == (local.utcoffset(), local.tzname(), local.dst())
        assert ours.astimezone(UTC) == instant
        instant += timedelta(minutes=37)


def test_the_zone_is_looked_up_only_when_a_time_is_shown(db, django_user_model, django_assert_num_queries):
    user = django_user_model.objects.create_user("ivan")
    NotificationSettings.objects.create(user=user, timezone="Europe/Moscow")
    reader = Reader(user.pk)
    with django_assert_num_queries(0), reading(reader):
        assert translation.get_language() == "en"
    with django_assert_num_queries(1), reading(reader):  # the user and their settings in one query
        shown = timezone.localtime(datetime(2026, 1, 1, 11, 5, tzinfo=UTC))
        assert (shown.hour, shown.minute) == (14, 5)
        assert reader.user.username == "ivan"


def test_a_user_without_settings_reads_in_the_sites_zone(db, django_user_model, settings):
    settings.TIME_ZONE = "Asia/Tokyo"
    user = django_user_model.objects.create_user("hana")
    with reading(Reader(user.pk)):
        assert timezone.localtime(datetime(2026, 1, 1, tzinfo=UTC)).hour == 9


@pytest.mark.parametrize(
    ("username", "language"),
    [("ivan", "ru"), ("ivan-ru", "ru"), ("klingon", "en"), ("ada", "en")],  # ru-RU is Russian; tlh is unsupported
)
def test_the_language_comes_from_the_hosts_callable(db, django_user_model, settings, username, language):
    settings.SLUICE_USER_LANGUAGE = "tests.languages.language_of"
    user = django_user_model.objects.create_user(username)
    assert Reader(user.pk).language == language


def test_the_language_comes_from_a_user_attribute(db, django_user_model, settings):
    settings.SLUICE_USER_LANGUAGE = "last_name"  # a host's user model field that holds a language code
    user = django_user_model.objects.create_user("olga", last_name="ru")
    assert Reader(user.pk).language == "ru"
    assert Reader(10**9).language == "en"  # a user who is gone: the site's language


def test_a_failing_callable_gives_the_sites_language(db, django_user_model, settings, caplog):
    settings.SLUICE_USER_LANGUAGE = "tests.languages.broken"
    user = django_user_model.objects.create_user("ivan")
    assert Reader(user.pk).language == "en"
    assert "SLUICE_USER_LANGUAGE failed" in caplog.text


def test_without_the_setting_no_user_is_loaded(db, django_assert_num_queries):
    with django_assert_num_queries(0):
        assert Reader(1).language == "en"
