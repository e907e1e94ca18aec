"""What people receive: SLUICE_SITE_URL, SLUICE_USER_LANGUAGE and SLUICE_EMAIL, validated for pipeline.conf."""

import re
from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import urljoin, urlsplit

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

from pipeline.conf.validate import mapping, positive_int

# A link in an email is followed for months: long enough for an old email's unsubscribe link to work, short enough
# that a leaked one stops working (a token never grants more than turning its own kinds off).
DEFAULT_EMAIL = {"site_name": "", "logo_url": "", "unsubscribe_max_age_days": 90}
MAX_UNSUBSCRIBE_DAYS = 3650
ATTRIBUTE = re.compile(r"[A-Za-z_]\w{0,99}")


@dataclass(frozen=True)
class MailSettings:
    """SLUICE_SITE_URL ("" when unset), SLUICE_USER_LANGUAGE resolved, and SLUICE_EMAIL's header and links."""

    site_url: str
    # None (LANGUAGE_CODE for everyone), an attribute name of the user model, or a callable taking the user.
    user_language: object
    site_name: str
    logo_url: str
    unsubscribe_max_age_s: int

    def absolute(self, path):
        """``path`` (a URL path such as reverse() gives) on SLUICE_SITE_URL; "" while it is unset."""
        if not self.site_url:
            return ""
        return self.site_url + path if path.startswith("/") else urljoin(self.site_url + "/", path)


def site_url(value):
    """SLUICE_SITE_URL: the address people reach the host at, "https://app.example.com" (a path prefix allowed),
    without a trailing slash; "" for None."""
    if value is None:
        return ""
    setting = "SLUICE_SITE_URL"
    if not isinstance(value, str) or len(value) > 500 or any(c.isspace() for c in value):
        raise ImproperlyConfigured(f"{setting} must be a URL such as 'https://app.example.com', got {value!r}")
    parts = urlsplit(value)
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise ImproperlyConfigured(f"{setting} must start with https:// (or http://) and name a host, got {value!r}")
    if parts.query or parts.fragment or parts.username or parts.password:
        raise ImproperlyConfigured(f"{setting} takes no query, fragment or login, got {value!r}")
    return value.rstrip("/")


def user_language(value):
    """SLUICE_USER_LANGUAGE: None, an attribute of the user model ("language"), or a dotted path to a callable that
    takes the user and returns a language code ("myapp.people.language_of")."""
    setting = "SLUICE_USER_LANGUAGE"
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise ImproperlyConfigured(
            f"{setting} must be an attribute name of the user model or a dotted path, got {value!r}"
        )
    if "." in value:
        try:
            found = import_string(value)
        except ImportError as exc:
            raise ImproperlyConfigured(f"{setting} names {value!r}, which does not import: {exc}") from exc
        if not callable(found):
            raise ImproperlyConfigured(f"{setting} names {value!r}, which is not callable")
        return found
    if not ATTRIBUTE.fullmatch(value):
        raise ImproperlyConfigured(
            f"{setting} must be an attribute name of the user model or a dotted path, got {value!r}"
        )
    from django.contrib.auth import get_user_model

    model = get_user_model()
    if not hasattr(model, value):
        raise ImproperlyConfigured(f"{setting} names {value!r}, which the user model {model.__name__} does not have")
    return value


def email(raw, site):
    """SLUICE_EMAIL: the header's ``site_name`` (default: SLUICE_SITE_URL's host) and ``logo_url`` (an absolute URL,
    or a path on SLUICE_SITE_URL; "" for none), and how many days an unsubscribe link works."""
    conf = {**DEFAULT_EMAIL, **mapping(raw, "SLUICE_EMAIL")}
    extra = set(conf) - set(DEFAULT_EMAIL)
    if extra:
        raise ImproperlyConfigured(f"SLUICE_EMAIL has unknown keys {sorted(extra)}")
    name = conf["site_name"]
    if not isinstance(name, str) or len(name) > 100 or "\n" in name or "\r" in name:
        raise ImproperlyConfigured(f"SLUICE_EMAIL['site_name'] must be one line of up to 100 characters, got {name!r}")
    logo = conf["logo_url"]
    if not isinstance(logo, str) or len(logo) > 1000 or any(c.isspace() for c in logo):
        raise ImproperlyConfigured(f"SLUICE_EMAIL['logo_url'] must be a URL or a path, got {logo!r}")
    if logo and not logo.startswith(("https://", "http://")):
        if not logo.startswith("/") or logo.startswith("//"):
            raise ImproperlyConfigured(
                f"SLUICE_EMAIL['logo_url'] must be https://... or a path starting with '/', got {logo!r}"
            )
        if not site:
            raise ImproperlyConfigured("SLUICE_EMAIL['logo_url'] is a path: set SLUICE_SITE_URL, which it is on")
        logo = site + logo
    days = positive_int(conf["unsubscribe_max_age_days"], "SLUICE_EMAIL['unsubscribe_max_age_days']")
    if days > MAX_UNSUBSCRIBE_DAYS:
        raise ImproperlyConfigured(
            f"SLUICE_EMAIL['unsubscribe_max_age_days'] must be at most {MAX_UNSUBSCRIBE_DAYS}, got {days!r}"
        )
    return {"site_name": name or (urlsplit(site).hostname or ""), "logo_url": logo, "max_age_s": days * 86400}


@lru_cache(maxsize=1)
def mail_settings():
    """The validated settings of what people receive; raise ImproperlyConfigured naming the bad setting."""
    site = site_url(getattr(settings, "SLUICE_SITE_URL", None))
    found = email(getattr(settings, "SLUICE_EMAIL", {}), site)
    return MailSettings(
        site_url=site,
        user_language=user_language(getattr(settings, "SLUICE_USER_LANGUAGE", None)),
        site_name=found["site_name"],
        logo_url=found["logo_url"],
        unsubscribe_max_age_s=found["max_age_s"],
    )
