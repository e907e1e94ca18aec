"""SLUICE_SITE_URL, SLUICE_USER_LANGUAGE, SLUICE_EMAIL and a kind's title: validated by the one resolver, a bad value
naming its exact key, and the check that emails' links have an address (sluice.E021, E022)."""

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.utils.translation import gettext_lazy, override

from notifications.checks import check_email_links
from pipeline.conf import sluice_settings
from pipeline.conf.mail import mail_settings


@pytest.mark.parametrize(
    ("name", "value", "words"),
    [
        ("SLUICE_SITE_URL", "app.example.com", r"SLUICE_SITE_URL must start with https://"),
        ("SLUICE_SITE_URL", "ftp://app.example.com", r"SLUICE_SITE_URL must start with https://"),
        ("SLUICE_SITE_URL", "https://", r"SLUICE_SITE_URL must start with https:// \(or http://\) and name a host"),
        ("SLUICE_SITE_URL", "https://app.example.com/?a=1", r"SLUICE_SITE_URL takes no query, fragment or login"),
        ("SLUICE_SITE_URL", "https://u:p@app.example.com", r"SLUICE_SITE_URL takes no query, fragment or login"),
        ("SLUICE_SITE_URL", 42, r"SLUICE_SITE_URL must be a URL"),
        ("SLUICE_SITE_URL", "https://app .example.com", r"SLUICE_SITE_URL must be a URL"),
        ("SLUICE_USER_LANGUAGE", "no_such_field", r"SLUICE_USER_LANGUAGE names 'no_such_field', which the user model"),
        ("SLUICE_USER_LANGUAGE", "tests.languages.nothing", r"SLUICE_USER_LANGUAGE names 'tests.languages.nothing'"),
        ("SLUICE_USER_LANGUAGE", "tests.languages.BY_USERNAME", r"which is not callable"),
        ("SLUICE_USER_LANGUAGE", "bad name", r"SLUICE_USER_LANGUAGE must be an attribute name"),
        ("SLUICE_USER_LANGUAGE", 3, r"SLUICE_USER_LANGUAGE must be an attribute name"),
        ("SLUICE_EMAIL", [], r"SLUICE_EMAIL must be a dict"),
        ("SLUICE_EMAIL", {"logo": "x"}, r"SLUICE_EMAIL has unknown keys \['logo'\]"),
        ("SLUICE_EMAIL", {"site_name": "a\nb"}, r"SLUICE_EMAIL\['site_name'\] must be one line"),
        ("SLUICE_EMAIL", {"logo_url": "javascript:x"}, r"SLUICE_EMAIL\['logo_url'\] must be https://"),
        ("SLUICE_EMAIL", {"logo_url": "//evil/x.png"}, r"SLUICE_EMAIL\['logo_url'\] must be https://"),
        ("SLUICE_EMAIL", {"unsubscribe_max_age_days": 0}, r"SLUICE_EMAIL\['unsubscribe_max_age_days'\] must be"),
        ("SLUICE_EMAIL", {"unsubscribe_max_age_days": 4000}, r"\['unsubscribe_max_age_days'\] must be at most 3650"),
    ],
)
def test_a_bad_setting_names_its_exact_key(settings, name, value, words):
    setattr(settings, name, value)
    with pytest.raises(ImproperlyConfigured, match=words):
        mail_settings()


def test_the_site_url_loses_its_trailing_slash_and_makes_paths_absolute(settings):
    settings.SLUICE_SITE_URL = "https://app.example.com/notify/"
    settings.SLUICE_EMAIL = {"logo_url": "/static/logo.png"}
    conf = mail_settings()
    assert conf.site_url == "https://app.example.com/notify"
    assert conf.absolute("/api/u/t/") == "https://app.example.com/notify/api/u/t/"
    assert conf.logo_url == "https://app.example.com/notify/static/logo.png"
    assert conf.site_name == "app.example.com"  # the host's, without a name of its own
    settings.SLUICE_SITE_URL = None
    settings.SLUICE_EMAIL = {}
    assert mail_settings().absolute("/api/u/t/") == ""


def test_a_logo_path_needs_the_site_url(settings):
    settings.SLUICE_SITE_URL = None
    settings.SLUICE_EMAIL = {"logo_url": "/logo.png"}
    with pytest.raises(ImproperlyConfigured, match=r"SLUICE_EMAIL\['logo_url'\] is a path: set SLUICE_SITE_URL"):
        mail_settings()


def test_the_user_language_is_an_attribute_or_a_callable(settings):
    settings.SLUICE_USER_LANGUAGE = "first_name"
    assert mail_settings().user_language == "first_name"
    settings.SLUICE_USER_LANGUAGE = "tests.languages.language_of"
    from tests.languages import language_of

    assert mail_settings().user_language is language_of


def test_a_kind_reads_as_its_title_or_its_name_in_words(settings):
    settings.SLUICE_KINDS = {
        "invoice.paid": {"class": "routine", "channels": ["email"]},
        "task.due_changed": {"class": "routine", "channels": ["email"], "title": "Due date moved"},
        "login:code": {"class": "critical", "channels": ["email"], "title": gettext_lazy("Notifications")},
    }
    kinds = sluice_settings().kinds
    assert kinds["invoice.paid"].title == "Invoice paid"
    assert kinds["task.due_changed"].title == "Due date moved"
    with override("ru"):
        assert str(kinds["login:code"].title) == "Уведомления"  # a lazy title is read in the reader's language


@pytest.mark.parametrize("title", ["", "   ", "a\nb", "x" * 201, 7])
def test_a_bad_title_names_its_key(settings, title):
    settings.SLUICE_KINDS = {"invoice.paid": {"class": "routine", "channels": ["email"], "title": title}}
    with pytest.raises(ImproperlyConfigured, match=r"SLUICE_KINDS\['invoice.paid'\]\['title'\] must be one line"):
        sluice_settings()


def test_email_links_need_the_site_url_unless_every_emailed_kind_is_mandatory(settings):
    settings.SLUICE_SITE_URL = None
    settings.SLUICE_EMAIL = {}  # Sluice's own project's logo is a path on the site
    [error] = check_email_links()
    assert error.id == "sluice.E021"
    assert "SLUICE_SITE_URL is not set" in error.msg
    settings.SLUICE_KINDS = {"login.code": {"class": "critical", "channels": ["email"], "mandatory": True}}
    assert check_email_links() == []  # a mandatory kind's email has no unsubscribe link
    settings.SLUICE_KINDS = {"x": {"class": "routine", "channels": ["push"]}}
    assert check_email_links() == []  # nothing goes by email
    settings.SLUICE_KINDS = {"x": {"class": "routine", "channels": ["email"]}}
    settings.SLUICE_SITE_URL = "https://app.example.com"
    assert check_email_links() == []


def test_email_links_need_notifications_urls_in_the_urlconf(settings):
    settings.SLUICE_SITE_URL = "https://app.example.com"
    settings.ROOT_URLCONF = "tests.unit.test_conf_mail"
    [error] = check_email_links()
    assert error.id == "sluice.E022"
    assert "does not include notifications.urls" in error.msg


urlpatterns = []  # a host's URLconf without notifications.urls (the test above)
