"""Every email is its text with a footer and HTML in the layout (the host's name and logo, the content, the footer's
links and why the person got it), CSS inlined with no <style> block left; a kind's own HTML template when it has
one; the one-click unsubscribe link on every message of a kind that is not mandatory, never on a mandatory one's."""

import time

import pytest

from notifications.channels import sends_html
from notifications.channels.email import headers_of
from notifications.delivery.messages import messages_of
from notifications.unsubscribe_links import read
from pipeline.sending.endings import Attempt

EMAIL = "notifications.channels.email.EmailChannel"
CONSOLE = "notifications.channels.console.ConsoleChannel"
KINDS = {
    "invoice.paid": {"class": "routine", "channels": ["email", "push"], "url": "/invoices/{entity_id}"},
    "login.code": {"class": "critical", "channels": ["email"], "mandatory": True, "title": "Sign-in code"},
}


@pytest.fixture
def mail(settings, db):
    settings.SLUICE_SITE_URL = "https://app.example.com"
    settings.SLUICE_EMAIL = {"site_name": "Acme", "logo_url": "/static/logo.png"}
    settings.SLUICE_CHANNELS = {"email": {"backend": EMAIL}, "push": {"backend": CONSOLE}}
    settings.SLUICE_KINDS = KINDS


def attempt(kind, **kwargs):
    event = {"notification_id": "n1", "kind": kind, "user_id": 7, "entity_id": "inv-42", "payload": {}}
    return Attempt("sluice.send.routine", "n1", {**event, **kwargs}, published_at=time.time())


def by_channel(messages):
    return {message.channel: message for message in messages[1]}


def test_an_email_has_the_layout_its_links_and_no_style_block(mail):
    sent = by_channel(messages_of(attempt("invoice.paid", payload={"title": "Invoice 42"})))
    email, push = sent["email"], sent["push"]
    assert email.subject == "Invoice paid: Invoice 42"  # the kind's name in words, never "invoice.paid"
    assert email.body.startswith("There is news about Invoice 42.\n\n-- \n")
    assert "Notification settings: https://app.example.com/api/pages/preferences/" in email.body
    assert f"Unsubscribe: {email.unsubscribe_url}" in email.body
    assert "<style" not in email.html
    assert 'style="' in email.html  # the layout's CSS, inlined
    assert 'src="https://app.example.com/static/logo.png"' in email.html
    assert ">Acme</a>" in email.html
    assert 'href="https://app.example.com/invoices/inv-42"' in email.html
    assert f'href="{email.unsubscribe_url}"' in email.html
    assert "“Invoice paid” notifications are on for you by email at Acme" in email.html
    # A channel that sends no HTML email keeps the text alone, and its own unsubscribe link (for its channel).
    assert (push.body, push.html) == ("There is news about Invoice 42.", "")
    token = read(email.unsubscribe_url.removeprefix("https://app.example.com/api/u/").rstrip("/"))
    assert (token.user_id, token.channel, token.scopes) == (7, "email", (("invoice.paid", ""),))
    assert read(push.unsubscribe_url.split("/u/")[1].rstrip("/")).channel == "push"


def test_the_email_headers_carry_the_one_click_unsubscribe(mail):
    email = by_channel(messages_of(attempt("invoice.paid")))["email"]
    headers = headers_of(email)
    assert headers["List-Unsubscribe"] == f"<{email.unsubscribe_url}>"
    assert headers["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"


def test_a_mandatory_kind_has_no_unsubscribe_link_and_says_why_it_came(mail):
    email = by_channel(messages_of(attempt("login.code", payload={"title": "123456"})))["email"]
    assert email.unsubscribe_url == ""
    assert "List-Unsubscribe" not in headers_of(email)
    assert "List-Unsubscribe-Post" not in headers_of(email)
    assert "Unsubscribe" not in email.body + email.html
    assert "it concerns your account at Acme (Sign-in code): it cannot be turned off" in email.body
    assert "<style" not in email.html


def test_a_kinds_own_html_template_renders_in_the_layout(mail, settings, tmp_path):
    (tmp_path / "sluice" / "email").mkdir(parents=True)
    (tmp_path / "sluice" / "email" / "invoice_paid.html").write_text(
        '{% extends "sluice/email/base.html" %}{% block content %}<p class="paid">Paid: {{ payload.title }}</p>'
        "<style>.paid { color: #123456; }</style>{% endblock %}"
    )
    engine = settings.TEMPLATES[0]
    settings.TEMPLATES = [{**engine, "DIRS": [str(tmp_path), *engine["DIRS"]]}]
    email = by_channel(messages_of(attempt("invoice.paid", payload={"title": "<b>42</b>"})))["email"]
    assert '<p class="paid" style="color: #123456;' in email.html  # its own style, inlined
    assert "Paid: &lt;b&gt;42&lt;/b&gt;</p>" in email.html
    assert "<style" not in email.html


def test_a_user_digest_email_lists_its_items_as_data_and_in_the_layout(mail):
    now = time.time()
    items = [
        {"kind": "invoice.paid", "entity_id": f"inv-{n}", "count": n, "payload": {"title": f"Invoice {n}"}}
        | {"first_seen": now - 60, "last_seen": now, "grain": "entity"}
        for n in (3, 1)
    ]
    digest = {"group": "user", "items": items, "more": 0, "more_events": 0}
    sent = by_channel(messages_of(attempt("invoice.paid", count=4, digest=digest, channels=["email", "push"])))
    email = sent["email"]
    assert email.subject == "4 updates in your digest"
    assert [(i.entity_id, i.count, i.title, i.url) for i in email.items] == [
        ("inv-3", 3, "Invoice 3", "https://app.example.com/invoices/inv-3"),
        ("inv-1", 1, "Invoice 1", "https://app.example.com/invoices/inv-1"),
    ]
    assert sent["push"].items == email.items  # every channel gets them: a push backend builds its own text
    assert "<style" not in email.html
    assert "Unsubscribe from these emails" in email.html
    assert "these notifications are on for you by email at Acme: Invoice paid." in email.body


def test_which_backends_send_html_is_their_classes_to_say(settings):
    settings.SLUICE_CHANNELS = {
        "email": {"backend": EMAIL},
        "esp": {"backend": "notifications.channels.esp.AnymailChannel", "options": {"email_backend": "x.y"}},
        "push": {"backend": CONSOLE},
    }
    assert (sends_html("email"), sends_html("esp"), sends_html("push")) == (True, True, False)
