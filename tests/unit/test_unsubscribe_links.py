"""One-click unsubscribe tokens: signed under a salt of their own, naming the user, the channel and what they turn
off; a token changed by one character, forged for another user, signed for another purpose or too old is refused."""

import base64
import time

import pytest
from django.core import signing

from notifications import unsubscribe_links as links
from notifications.unsubscribe_links import BadLink
from pipeline.conf import sluice_settings


def test_a_token_names_its_user_channel_and_scopes():
    token = links.token(42, "email", [("task.comment", ""), ("", "tasks"), ("task.comment", "")])
    found = links.read(token)
    assert (found.user_id, found.channel, found.scopes) == (42, "email", (("", "tasks"), ("task.comment", "")))


@pytest.mark.parametrize("position", [0, 10, -1, -20])
def test_a_token_changed_by_one_character_is_refused(position):
    token = links.token(42, "email", [("task.comment", "")])
    changed = list(token)
    changed[position] = "A" if changed[position] != "A" else "B"
    with pytest.raises(BadLink) as refused:
        links.read("".join(changed))
    assert refused.value.reason == "invalid"


def test_a_token_made_for_another_user_with_this_ones_signature_is_refused():
    ours = links.token(42, "email", [("task.comment", "")])
    theirs = links.token(7, "email", [("task.comment", "")])
    # Their payload (user 7) under our timestamp and signature: the signature covers the payload.
    forged = theirs.split(":")[0] + ":" + ":".join(ours.split(":")[1:])
    with pytest.raises(BadLink, match="changed"):
        links.read(forged)
    payload = base64.urlsafe_b64encode(b'{"u":7,"c":"email","s":[["task.comment",""]]}').decode().rstrip("=")
    with pytest.raises(BadLink):
        links.read(payload + ":" + ":".join(ours.split(":")[1:]))


def test_a_value_signed_for_another_purpose_is_refused():
    # Signed with the same SECRET_KEY, as a session or a password reset is: another salt, so not a token.
    other = signing.dumps({"u": 42, "c": "email", "s": [["task.comment", ""]]}, salt="django.contrib.sessions")
    with pytest.raises(BadLink, match="not an unsubscribe link of ours"):
        links.read(other)
    with pytest.raises(BadLink):
        links.read(signing.dumps({"u": 42}, salt=links.SALT))  # ours, but not a token's shape


def test_a_token_past_its_age_is_refused_as_expired(settings, monkeypatch):
    settings.SLUICE_EMAIL = {"unsubscribe_max_age_days": 1}
    made = time.time() - 86400 - 60
    monkeypatch.setattr(signing.time, "time", lambda: made)
    token = links.token(42, "email", [("task.comment", "")])
    monkeypatch.undo()
    with pytest.raises(BadLink) as refused:
        links.read(token)
    assert refused.value.reason == "expired"


@pytest.mark.parametrize("value", ["", "x" * (links.MAX_TOKEN_CHARS + 1), None])
def test_nothing_or_too_much_is_refused_before_any_signature_is_checked(value):
    with pytest.raises(BadLink):
        links.read(value)


def test_the_scopes_leave_mandatory_kinds_out_and_take_an_escalations_category(settings):
    inbox = "notifications.inbox.channel.InboxChannel"
    settings.SLUICE_CHANNELS = {
        "email": {"backend": "notifications.channels.locmem.LocmemChannel"},
        "inbox": {"backend": inbox},
    }
    escalate = {"after_s": 60, "channels": ["email"]}
    settings.SLUICE_KINDS = {
        "task.comment": {"class": "routine", "channels": ["email"]},
        "login.code": {"class": "critical", "channels": ["email"], "mandatory": True},
        "doc.changed": {"class": "routine", "channels": ["inbox"], "category": "docs", "escalate": escalate},
        "doc.note": {"class": "routine", "channels": ["inbox"], "escalate": escalate},
    }
    kinds = sluice_settings().kinds
    assert links.scopes([kinds["task.comment"]], "email") == (("task.comment", ""),)
    assert links.scopes([kinds["login.code"]], "email") == ()
    # An inbox kind that escalates by email is decided there by its category: the link turns that off.
    assert links.scopes([kinds["doc.changed"]], "email") == (("", "docs"),)
    assert links.scopes([kinds["doc.note"]], "email") == ()  # nothing narrower than every kind holds it
    assert links.scopes(kinds.values(), "email") == (("", "docs"), ("task.comment", ""))


def test_the_link_is_absolute_on_the_site_url_and_absent_without_it(settings):
    settings.SLUICE_SITE_URL = "https://app.example.com"
    url = links.url(42, "email", [("task.comment", "")])
    assert url.startswith("https://app.example.com/api/u/")
    assert links.read(url.removeprefix("https://app.example.com/api/u/").rstrip("/")).user_id == 42
    assert links.url(42, "email", []) == ""
    settings.SLUICE_SITE_URL = None
    settings.SLUICE_EMAIL = {}  # Sluice's own project's logo is a path on the site
    assert links.url(42, "email", [("task.comment", "")]) == ""
