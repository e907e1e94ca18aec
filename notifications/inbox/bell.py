"""The bell a host drops into its pages: the unread count (from Redis), and what the bell's script needs."""

from django.urls import reverse
from redis.exceptions import RedisError

from . import unread

#: How often the bell's script asks for the count, in seconds (the tag's ``poll_s`` changes it).
POLL_S = 30
# The item id in the open URL the script is given: it puts each item's own id in its place.
ID_SLOT = 999999999


def context(request, poll_s=POLL_S, namespace="sluice"):
    """The bell's template context for the signed-in user of ``request`` (an empty one for nobody)."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {"signed_in": False}
    try:
        count = unread.read(user.pk)[0]
    except RedisError:
        count = None  # the script fills it in once Redis answers
    return {
        "signed_in": True,
        "unread": count,
        "poll_ms": int(poll_s * 1000),
        "urls": {
            "unread": reverse(f"{namespace}:inbox_unread"),
            "items": reverse(f"{namespace}:inbox"),
            "read": reverse(f"{namespace}:inbox_read"),
            "open": reverse(f"{namespace}:inbox_open", args=[ID_SLOT]).replace(str(ID_SLOT), "{id}"),
            # The pages the panel links to: "See all" and "Settings".
            "page": reverse(f"{namespace}:inbox_page"),
            "settings": reverse(f"{namespace}:preferences_page"),
        },
    }
