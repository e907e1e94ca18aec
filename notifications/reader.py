"""Who reads a message or a page: the user, their language and their time zone, loaded once, and only when used."""

import logging
from contextlib import contextmanager
from datetime import tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.conf import settings
from django.core.exceptions import ObjectDoesNotExist
from django.db import DatabaseError
from django.utils import timezone, translation
from django.utils.functional import SimpleLazyObject

from pipeline.conf.mail import mail_settings

logger = logging.getLogger("sluice.send")

# The user's NotificationSettings row, by its related name: the preferences wing owns the model, and the face
# reaches it through the user, as the email channel reaches the suppressions through the app registry.
SETTINGS_RELATION = "notification_settings"


class Reader:
    """The recipient ``user_id`` as a message renders for them: ``user`` (loaded when a template uses it),
    ``language`` (SLUICE_USER_LANGUAGE, else LANGUAGE_CODE) and ``zone`` (their NotificationSettings.timezone, else
    TIME_ZONE; looked up only when a time is shown). One query loads the user and their settings, at most."""

    def __init__(self, user_id, user=None, language=None, default_language=None):
        self.user_id = user_id
        self._found = user
        self._loaded = user is not None
        self._language = language
        self._default_language = default_language
        self.user = SimpleLazyObject(self._user) if user is None else user
        self.zone = _LazyZone(self._zone_of)

    def _user(self):
        if not self._loaded:
            self._loaded = True
            from django.contrib.auth import get_user_model

            try:
                manager = get_user_model()._default_manager
                self._found = manager.select_related(SETTINGS_RELATION).filter(pk=self.user_id).first()
            except DatabaseError as exc:
                # Sending needs Redis, not the database: the site's language and zone are worth more than no send.
                logger.warning("the recipient of a message could not be loaded (%s): the site's language and zone", exc)
        return self._found

    @property
    def language(self):
        """The language code to render in, one Django supports (settings.LANGUAGES)."""
        if self._language is None:
            asked = _asked(mail_settings().user_language, self._user)
            self._language = _supported(asked) if asked else self._default_language or settings.LANGUAGE_CODE
        return self._language

    def _zone_of(self):
        user = self._user()
        name = None
        if user is not None:
            try:
                name = getattr(user, SETTINGS_RELATION).timezone
            except (ObjectDoesNotExist, AttributeError):
                name = None
        try:
            return ZoneInfo(name) if name else timezone.get_default_timezone()
        except (ZoneInfoNotFoundError, ValueError):
            return timezone.get_default_timezone()


def _asked(source, load):
    """The language the host's SLUICE_USER_LANGUAGE gives for the user ``load()`` returns; None for the default."""
    if source is None:
        return None
    user = load()
    if user is None:
        return None
    try:
        found = source(user) if callable(source) else getattr(user, source, None)
    except Exception:  # the host's callable: its failure must not hold the send back
        logger.warning("SLUICE_USER_LANGUAGE failed for a user: the site's language", exc_info=True)
        return None
    return found if isinstance(found, str) and found else None


def _supported(code):
    """``code`` as one of settings.LANGUAGES ("ru-RU" -> "ru"), else LANGUAGE_CODE."""
    try:
        return translation.get_supported_language_variant(code)
    except LookupError:
        return settings.LANGUAGE_CODE


def for_request(request):
    """The signed-in user of ``request`` as a page renders for them: the language SLUICE_USER_LANGUAGE gives them,
    else the request's own (LocaleMiddleware's choice, or LANGUAGE_CODE); their time zone."""
    user = request.user
    return Reader(user.pk, user=user, default_language=translation.get_language())


@contextmanager
def reading(reader):
    """Render in ``reader``'s language and time zone."""
    with translation.override(reader.language), timezone.override(reader.zone):
        yield


class _LazyZone(tzinfo):
    """A time zone looked up the first time a time is converted to it: a message that shows no time costs no query.
    Every answer is the looked-up zone's (ZoneInfo's, with its fold rules)."""

    def __init__(self, load):
        self._load = load
        self._zone = None

    def _found(self):
        if self._zone is None:
            self._zone = self._load()
        return self._zone

    def utcoffset(self, dt):
        zone = self._found()
        return zone.utcoffset(None if dt is None else dt.replace(tzinfo=zone))

    def dst(self, dt):
        zone = self._found()
        return zone.dst(None if dt is None else dt.replace(tzinfo=zone))

    def tzname(self, dt):
        zone = self._found()
        return zone.tzname(None if dt is None else dt.replace(tzinfo=zone))

    def fromutc(self, dt):
        zone = self._found()
        return zone.fromutc(dt.replace(tzinfo=zone)).replace(tzinfo=self)

    def __repr__(self):
        return f"<zone {self._zone!s}>" if self._zone is not None else "<zone not looked up yet>"
