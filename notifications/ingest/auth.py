"""Bearer-token authentication for ingest: the Authorization header only, never a session or a cookie."""

import re

from notifications.ingest.models import IngestToken, digest

# The shape of any token set_new_token() makes, with room to spare; anything else is not looked up at all.
TOKEN_SHAPE = re.compile(r"[A-Za-z0-9_\-]{16,128}")


class AuthenticationFailed(Exception):
    """No usable token: missing, malformed, unknown or revoked. The message is safe to show the client."""


def authenticate(request):
    """The active IngestToken named by ``Authorization: Bearer <token>``; raise AuthenticationFailed."""
    header = request.headers.get("Authorization", "")
    scheme, _, raw = header.partition(" ")
    if not header:
        raise AuthenticationFailed("send the token as 'Authorization: Bearer <token>'")
    raw = raw.strip()
    if scheme.lower() != "bearer" or not TOKEN_SHAPE.fullmatch(raw):
        raise AuthenticationFailed("the Authorization header is not 'Bearer <token>'")
    token = IngestToken.objects.filter(digest=digest(raw)).first()
    # Unknown and revoked read the same, so the answer never confirms that a leaked token once existed.
    if token is None or not token.is_active:
        raise AuthenticationFailed("the token is unknown or revoked")
    token.touch()
    return token
