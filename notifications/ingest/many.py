"""POST /api/notifications/ with "users": one event for many users (notify_many()), and its answer.

The users are primary keys, at most MAX_USERS a request; the token's rate is charged one request per user (a
request allowed is allowed whole, and leaves the token's bucket in debt for its users). The
answer is 202 with what became of the users: counts by outcome, the users rejected (a critical kind with no room
within its wait, with Retry-After; a scheduled critical send with no room in its window, with available_at), and for
a token that reveals details the unknown users. A token that does not is told every user it did not reject was
accepted, as for one user.
"""

from datetime import UTC, datetime

from notifications.outcome import Outcome

# The most users one request names: beyond it, one request per batch of users (each a bounded amount of work).
MAX_USERS = 1000


class BadUsers(ValueError):
    """``users`` is not a list of 1 to MAX_USERS user ids."""


def users_of(event, well_formed):
    """The request's ``users``, checked: a list of 1 to MAX_USERS ids, each ``well_formed``; BadUsers naming what is
    wrong otherwise."""
    users = event["users"]
    if "user" in event:
        raise BadUsers('give "user" or "users", not both')
    if not isinstance(users, list) or not users:
        raise BadUsers("users must be a non-empty list of user ids")
    if len(users) > MAX_USERS:
        raise BadUsers(f"users names {len(users)} users; the limit is {MAX_USERS} a request")
    bad = [user for user in users if not well_formed(user)]
    if bad:
        raise BadUsers(f"users must be user ids (integers or strings), got a {type(bad[0]).__name__}")
    return users


def answer(token, fanned):
    """The 202 body for a Fanout (notifications.fanout), as the token may see it."""
    if token.reveal_details:
        body = {"users": fanned.users, "counts": {str(o): n for o, n in fanned.counts.items()}}
        if fanned.unknown:
            body["unknown"] = fanned.unknown
        if fanned.counts.get(Outcome.SCHEDULED):
            body.update(moved=fanned.moved, previous_sent=fanned.previous_sent)
        if fanned.replayed:
            body["replayed"] = fanned.replayed
    else:
        # Every user not rejected reads as accepted, an unknown one too: a token may not learn which ids exist.
        taken = fanned.users - len(fanned.rejected) - len(fanned.schedule_full)
        body = {"users": fanned.users, "counts": {"accepted": taken} if taken else {}}
    if fanned.rejected:
        body["rejected"] = fanned.rejected
        if fanned.retry_after is not None:
            body["retry_after"] = fanned.retry_after
        if fanned.available_at is not None:
            body["available_at"] = datetime.fromtimestamp(fanned.available_at, UTC).isoformat().replace("+00:00", "Z")
    if fanned.schedule_full:
        body["schedule_full"] = fanned.schedule_full
    return body
