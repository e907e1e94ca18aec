"""One-click unsubscribe links (RFC 8058): a signed token that names the user, the channel and what it turns off.

The delivery wing puts a link in each message it renders; the preferences wing reads it back when it is followed.
The token is signed with the project's SECRET_KEY under a salt of its own (no other signed value of the project is
one), carries when it was made, and needs no session: it grants nothing but turning its own kinds off on its own
channel for its own user.
"""

from dataclasses import dataclass

from django.core import signing
from django.urls import NoReverseMatch, reverse

from pipeline.conf.mail import mail_settings

SALT = "sluice.unsubscribe"
# A digest's token names its listed kinds (SLUICE_DIGEST["max_items"], at most 200): compressed, well under this.
MAX_TOKEN_CHARS = 4000


class BadLink(Exception):
    """A link that is not one of ours, was changed, or is too old: ``reason`` is "invalid" or "expired"."""

    def __init__(self, reason, detail):
        super().__init__(detail)
        self.reason = reason


@dataclass(frozen=True)
class Unsubscribe:
    """What a valid link turns off: each of ``scopes`` (kind, category) on ``channel`` for ``user_id``, as
    notifications.preferences.set takes them: a kind ("task.comment", ""), or a category ("", "tasks")."""

    user_id: object
    channel: str
    scopes: tuple


def scopes(kinds, channel):
    """The scopes that turn ``kinds`` (Kind objects) off on ``channel``: each kind sent on it, itself; a kind that
    reaches it only by escalation (notifications.inbox.escalation), its category, which is what decides there; a
    mandatory kind, or an escalating one without a category, nothing (no scope narrower than every kind holds it)."""
    found = set()
    for kind in kinds:
        if kind.mandatory:
            continue
        if channel in kind.channels:
            found.add((kind.name, ""))
        elif kind.category:
            found.add(("", kind.category))
    return tuple(sorted(found))


def token(user_id, channel, scopes):
    """The signed token for turning ``scopes`` off on ``channel`` for ``user_id``."""
    user = user_id if isinstance(user_id, int) else str(user_id)
    listed = sorted({(kind, category) for kind, category in scopes})
    return signing.dumps({"u": user, "c": channel, "s": listed}, salt=SALT, compress=True)


def read(value):
    """The Unsubscribe a token names; BadLink when it is not a valid token of ours, or is past its age."""
    if not isinstance(value, str) or not value or len(value) > MAX_TOKEN_CHARS:
        raise BadLink("invalid", "this is not an unsubscribe link of ours")
    try:
        found = signing.loads(value, salt=SALT, max_age=mail_settings().unsubscribe_max_age_s)
    except signing.SignatureExpired:
        raise BadLink("expired", "this unsubscribe link has expired") from None
    except (signing.BadSignature, ValueError):
        raise BadLink("invalid", "this is not an unsubscribe link of ours, or it was changed") from None
    if not isinstance(found, dict) or set(found) != {"u", "c", "s"}:
        raise BadLink("invalid", "this is not an unsubscribe link of ours")
    user, channel, listed = found["u"], found["c"], found["s"]
    if not isinstance(user, (int, str)) or isinstance(user, bool) or not isinstance(channel, str):
        raise BadLink("invalid", "this is not an unsubscribe link of ours")
    if not isinstance(listed, list) or not listed or not all(_scope(item) for item in listed):
        raise BadLink("invalid", "this is not an unsubscribe link of ours")
    return Unsubscribe(user, channel, tuple(tuple(item) for item in listed))


def _scope(item):
    return isinstance(item, list) and len(item) == 2 and all(isinstance(part, str) for part in item) and any(item)


def url(user_id, channel, scopes):
    """The absolute unsubscribe link on SLUICE_SITE_URL; "" while it is unset, for no scopes, or when the host's
    URLconf does not include notifications.urls (the checks report both)."""
    conf = mail_settings()
    if not conf.site_url or not scopes:
        return ""
    path = path_of("sluice:unsubscribe", token(user_id, channel, scopes))
    return conf.absolute(path) if path else ""


def path_of(name, *args):
    """reverse(name, args) in the host's URLconf, or "" when it does not include notifications.urls."""
    try:
        return reverse(name, args=args)
    except NoReverseMatch:
        return ""
