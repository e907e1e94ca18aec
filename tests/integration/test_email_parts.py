"""Every email Sluice sends has a text part and an HTML part, its HTML with no <style> block left (the CSS inlined),
and the one-click unsubscribe headers exactly when its kind is not mandatory: sent by a real worker through a real
SMTP server (an instant email of each class, a mandatory one, a user's digest, a single fold's digest, a background
collapse), the coarser digests of a fold store under pressure, and the anymail channel."""

import time

import pytest
from celery.contrib.testing.worker import start_worker
from django.core import mail

from digest.flush import run_flush
from notifications import Outcome, notify, preferences
from notifications.channels.email import EmailChannel
from notifications.channels.esp import AnymailChannel
from notifications.delivery.messages import messages_of
from pipeline.celery import app
from pipeline.sending.endings import Attempt
from tests.smtp_capture import smtp_capture
from tests.waiting import settled, wait_for

EMAIL = "notifications.channels.email.EmailChannel"
LOCMEM = "notifications.channels.locmem.LocmemChannel"
KINDS = {
    "meeting.reminder": {"class": "critical", "channels": ["email", "push"]},
    "login.code": {"class": "critical", "channels": ["email"], "mandatory": True, "title": "Sign-in code"},
    "task.assigned": {"class": "routine", "channels": ["email", "push"], "url": "/tasks/{entity_id}"},
    "task.comment": {"class": "routine", "channels": ["email"], "url": "/tasks/{entity_id}"},
    "doc.edited": {"class": "routine", "channels": ["email"], "digest_group": "entity"},
    "board.updated": {"class": "background", "channels": ["email"]},
}


@pytest.fixture
def smtp(settings):
    with smtp_capture() as (controller, received):
        settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
        settings.EMAIL_HOST, settings.EMAIL_PORT = controller.hostname, controller.port
        yield received


@pytest.fixture
def mail_settings(settings, redis_client):
    settings.SLUICE_SITE_URL = "https://app.example.com"
    settings.SLUICE_CHANNELS = {"email": {"backend": EMAIL}, "push": {"backend": LOCMEM}}
    settings.SLUICE_KINDS = KINDS


def parts_of(message):
    """(text, html) of a sent email, checking it is multipart/alternative with exactly those two parts."""
    assert message.get_content_type() == "multipart/alternative", message["Subject"]
    types = [part.get_content_type() for part in message.iter_parts()]
    assert types == ["text/plain", "text/html"], (message["Subject"], types)
    text, html = (part.get_content() for part in message.iter_parts())
    return text, html


def check(message):
    """Both parts, no <style> block, and the unsubscribe headers exactly when its kind is not mandatory."""
    text, html = parts_of(message)
    assert text.strip()
    assert "<style" not in html.lower(), message["Subject"]
    assert 'style="' in html
    mandatory = message["X-Sluice-Kind"] == "login.code"
    if mandatory:
        assert message["List-Unsubscribe"] is None
        assert message["List-Unsubscribe-Post"] is None
    else:
        assert str(message["List-Unsubscribe"]).strip().startswith("<https://app.example.com/api/u/"), message[
            "Subject"
        ]
        assert message["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
        assert str(message["List-Unsubscribe"]).strip()[1:-1] in html
    return text, html


@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(60)
def test_every_email_a_worker_sends_has_both_parts_and_inlined_css(smtp, mail_settings, user):
    with start_worker(
        app,
        pool="threads",
        concurrency=2,
        perform_ping_check=False,
        queues=["critical", "routine", "background"],
        loglevel="WARNING",
        shutdown_timeout=30,
    ):
        notify(user, "meeting.reminder", entity_id="m1", payload={"title": "Planning"})
        notify(user, "login.code", entity_id="c1", payload={"title": "123456"})
        notify(user, "task.assigned", entity_id="t0", payload={"title": "Budget"})
        wait_for(lambda: len(smtp) == 3, what=lambda: f"three instant emails, {len(smtp)} came")
        preferences.set(user, mode="digest")  # every kind into the digest (critical and mandatory stay instant)
        for n in range(3):
            assert notify(user, "task.comment", entity_id="t1", payload={"title": "Report", "n": n}) == Outcome.FOLDED
        for n in range(2):
            notify(user, "task.assigned", entity_id="t2", payload={"title": "Roadmap", "n": n})
        for n in range(4):
            notify(user, "doc.edited", entity_id="d1", payload={"title": "Spec", "n": n})
        for n in range(2):
            notify(user, "board.updated", entity_id="b1", payload={"title": "Board", "n": n})
        run_flush("test")
        wait_for(lambda: len(smtp) == 6, what=lambda: f"six emails, {len(smtp)} came: {[m['Subject'] for m in smtp]}")
        wait_for(lambda: settled("critical", "routine", "background"), what="every send acked")
    subjects = {message["Subject"]: check(message) for message in smtp}
    assert set(subjects) >= {"Reminder: Planning starts soon", "5 updates in your digest", "4 updates on Spec"}
    text, html = subjects["5 updates in your digest"]
    assert "https://app.example.com/tasks/t1" in html
    assert "Notification settings: https://app.example.com/api/pages/preferences/" in text


@pytest.mark.django_db
def test_the_coarser_digests_and_the_anymail_channel_have_both_parts_too(smtp, mail_settings, user, settings):
    now = time.time()
    shapes = [
        {"kind": "task.comment", "count": 8, "grain": "kind", "entities": 4, "kinds": 1},
        {"kind": "task.comment", "count": 36, "grain": "user", "entities": 12, "kinds": 2},
        {"kind": "login.code", "count": 1},
    ]
    for n, shape in enumerate(shapes):
        kwargs = {"notification_id": f"n{n}", "user_id": user.pk, "entity_id": "", "payload": {}, "channels": ["email"]}
        _kind, [message] = messages_of(Attempt("sluice.send.routine", f"n{n}", kwargs | shape, published_at=now))
        EmailChannel("email").send(message)
    assert [m["Subject"] for m in smtp][:2] == ["Task comment: 8 updates across 4 items", "36 new notifications"]
    for message in smtp:
        check(message)
    esp = {"backend": "notifications.channels.esp.AnymailChannel"}
    esp["options"] = {"email_backend": "anymail.backends.test.EmailBackend"}
    settings.SLUICE_CHANNELS = {"email": esp, "push": {"backend": LOCMEM}}
    kwargs = {"notification_id": "a1", "user_id": user.pk, "entity_id": "t9", "payload": {}, "kind": "task.comment"}
    _kind, [message] = messages_of(Attempt("sluice.send.routine", "a1", kwargs, published_at=now))
    AnymailChannel("email", email_backend="anymail.backends.test.EmailBackend").send(message)
    [sent] = mail.outbox
    assert sent.body == message.body
    assert [kind for _html, kind in sent.alternatives] == ["text/html"]
    assert "<style" not in sent.alternatives[0][0]
    assert sent.extra_headers["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
    assert sent.extra_headers["List-Unsubscribe"] == f"<{message.unsubscribe_url}>"
