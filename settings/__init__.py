"""Django settings for Sluice: everything from the environment, with working local defaults."""

import os
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent


def _flag(name, default):
    return os.environ.get(name, "1" if default else "0").strip().lower() in ("1", "true", "yes", "on")


def _list(name, default=""):
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


DEBUG = _flag("DJANGO_DEBUG", False)
# This key is in the repository, so anyone can forge sessions, CSRF tokens and password-reset links signed with
# it: it serves local development (DEBUG on) only. The tests and `make demo` set a key of their own.
PUBLIC_DEVELOPMENT_KEY = "sluice-local-development-key-not-for-production"
SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY") or PUBLIC_DEVELOPMENT_KEY
if SECRET_KEY == PUBLIC_DEVELOPMENT_KEY and not DEBUG:
    raise ImproperlyConfigured(
        "DJANGO_SECRET_KEY is not set, and DEBUG is off: refusing to run with the public development key. Set "
        "DJANGO_SECRET_KEY to a long random string (the chart does), or DJANGO_DEBUG=1 for local development."
    )
ALLOWED_HOSTS = _list("DJANGO_ALLOWED_HOSTS", "localhost,127.0.0.1")
# The origins a browser form may post from (the admin behind a proxy on another host name), e.g.
# "https://notify.example.com".
CSRF_TRUSTED_ORIGINS = _list("DJANGO_CSRF_TRUSTED_ORIGINS")

# HTTPS. Cookies are secure unless DEBUG is on (or DJANGO_SECURE_COOKIES=0, as for the demo on plain HTTP).
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = _flag("DJANGO_SECURE_COOKIES", not DEBUG)
# Behind a TLS-terminating proxy, the header that says the request came over HTTPS. Set it only when the proxy
# overwrites that header on every request: a client could otherwise claim HTTPS itself.
_proxy_header = os.environ.get("DJANGO_SECURE_PROXY_SSL_HEADER", "").strip()  # e.g. X-Forwarded-Proto
if _proxy_header:
    SECURE_PROXY_SSL_HEADER = ("HTTP_" + _proxy_header.upper().replace("-", "_"), "https")
SECURE_SSL_REDIRECT = _flag("DJANGO_SECURE_SSL_REDIRECT", False)
# Never redirected: the kubelet's probes (plain HTTP), and the API, whose clients a redirect would turn from a
# POST into a GET; TLS to the API is the ingress's job.
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^api/"]
SECURE_HSTS_SECONDS = int(os.environ.get("DJANGO_SECURE_HSTS_SECONDS", "0"))
SECURE_HSTS_INCLUDE_SUBDOMAINS = _flag("DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_HSTS_PRELOAD = _flag("DJANGO_SECURE_HSTS_PRELOAD", False)

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_celery_beat",
    "notifications",
    "digest",
    "pipeline",
    "sluice_tools",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # The static files (the admin's, the inbox bell's) under gunicorn: the image collects them at build time.
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "settings.urls"
WSGI_APPLICATION = "settings.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        # The demo project's own templates: its admin shows the inbox bell (admin/base_site.html), as a host's would.
        "DIRS": [BASE_DIR / "settings" / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator", "OPTIONS": {"min_length": 12}},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

# SQLite's settings for several writers at once (the web process, beat and each worker pool): WAL lets readers go
# on beside a writer; every transaction takes the write lock when it begins (IMMEDIATE), so two transactions that
# read and then write never deadlock (a deferred one failed at once with "database is locked", whatever the
# timeout); and a writer waits up to `timeout` seconds for the lock. It is for a trial: PostgreSQL is the database
# for anything more (docs/integrate.md).
_SQLITE_OPTIONS = {
    "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL",
    "transaction_mode": "IMMEDIATE",
    "timeout": 20,
}


def _database(url, conn_max_age=0):
    """The database of ``url``; an SQLite one set up for concurrent writers (_SQLITE_OPTIONS)."""
    config = dj_database_url.parse(url, conn_max_age=conn_max_age)
    if config["ENGINE"] == "django.db.backends.sqlite3":
        config["OPTIONS"] = {**_SQLITE_OPTIONS, **config.setdefault("OPTIONS", {})}
    return config


DATABASES = {
    "default": _database(
        os.environ.get("DATABASE_URL", f"sqlite:///{BASE_DIR / 'sluice.sqlite3'}"),
        conn_max_age=int(os.environ.get("DATABASE_CONN_MAX_AGE", "0")),
    )
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

LANGUAGE_CODE = "en"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
STATIC_URL = "static/"
# Where collectstatic puts the static files, and whitenoise serves them from: the image runs collectstatic when it is
# built (the Dockerfile). A checkout that has not collected them (development, the tests, the demo) has whitenoise
# find each in its app instead, when it is asked for.
STATIC_ROOT = Path(os.environ.get("DJANGO_STATIC_ROOT") or BASE_DIR / "staticfiles")
WHITENOISE_AUTOREFRESH = WHITENOISE_USE_FINDERS = DEBUG or not STATIC_ROOT.is_dir()

EMAIL_BACKEND = os.environ.get("EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")
EMAIL_HOST = os.environ.get("EMAIL_HOST", "localhost")
EMAIL_PORT = int(os.environ.get("EMAIL_PORT", "25"))
# The SMTP login: in the chart, secrets.extraEnv puts EMAIL_HOST_PASSWORD in the Secret.
EMAIL_HOST_USER = os.environ.get("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = os.environ.get("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = _flag("EMAIL_USE_TLS", False)
DEFAULT_FROM_EMAIL = os.environ.get("DEFAULT_FROM_EMAIL", "sluice@localhost")
# anymail's settings from ANYMAIL_<NAME> variables (the chart's secrets.anymail): ANYMAIL_WEBHOOK_SECRET
# ("user:password") authenticates the ESPs' tracking webhooks, ANYMAIL_MAILGUN_WEBHOOK_SIGNING_KEY and the like
# check the ESPs that sign theirs, ANYMAIL_POSTMARK_SERVER_TOKEN and the like are the ESPs' API keys.
ANYMAIL = {
    name.removeprefix("ANYMAIL_"): value
    for name, value in os.environ.items()
    if name.startswith("ANYMAIL_") and value.strip()
}

from .sluice import *  # noqa: E402,F403

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "loggers": {
        "sluice": {"handlers": ["console"], "level": os.environ.get("SLUICE_LOG_LEVEL", "INFO")},
        # Django logs a 5xx (with its stack) and a refused forged request at ERROR; its own default shows them only
        # while DEBUG is on, and mails them to ADMINS, which this project has none of.
        "django.request": {"handlers": ["console"], "level": "ERROR"},
        "django.security": {"handlers": ["console"], "level": "ERROR"},
    },
}
