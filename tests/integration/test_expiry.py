"""Messages that expire: a sign-in code not sent in time is never sent late, and its retries never outlive it."""

import base64
import json
import time

import pytest
from celery.contrib.testing.worker import start_worker
from django.core.exceptions import ImproperlyConfigured

from notifications import notify
from notifications.channels.base import Message, TransientSendError
from pipeline.broker import deadletters
from pipeline.celery import app
from pipeline.conf import sluice_settings
from pipeline.metrics import read_counters
from pipeline.sending import expiry
from pipeline.sending.engine import send_deadline
from tests import scripted
from tests.waiting import settled, wait_for

SCRIPTED = "tests.scripted.ScriptedChannel"


@pytest.fixture
def kinds(settings, redis_client):
    settings.SLUICE_CHANNELS = {name: {"backend": SCRIPTED} for name in ("email", "sms", "push")}
    settings.SLUICE_KINDS = {
        "login.code": {"class": "critical", "channels": ["sms"], "expires_after_s": 1},
        "login.code.slow": {"class": "critical", "channels": ["sms", "email"], "expires_after_s": 2},
        "task.comment": {"class": "routine", "channels": ["email"]},
    }
    scripted.reset()
    yield scripted
    scripted.reset()


def start(queues=("critical",)):
    return start_worker(
        app,
        pool="threads",
        concurrency=1,
        perform_ping_check=False,
        queues=list(queues),
        loglevel="WARNING",
        shutdown_timeout=30,
    )


def test_an_expired_sign_in_code_is_never_sent(kinds, user):
    notify(user, "login.code", entity_id="login-1", payload={"code": "123456"})
    time.sleep(1.2)  # no worker took it within its second
    with start():
        wait_for(lambda: deadletters.size() == 1)
    [letter] = deadletters.entries()
    assert (letter.reason, letter.kind, letter.channels) == ("expired", "login.code", ["sms"])
    assert kinds.sent == []
    assert read_counters()["deadletters:critical:expired"] == 1


def test_critical_retries_never_outlive_the_expiry(kinds, user):
    attempts = []

    def fail(message):
        attempts.append(time.time())
        raise TransientSendError("provider down")

    kinds.plan["sms"] = [fail] * 6
    with start():
        before = time.time()
        notify(user, "login.code.slow", entity_id="login-2")
        wait_for(lambda: deadletters.size() >= 1)
        wait_for(lambda: settled("critical"), what="the last attempt acked")
    [letter] = deadletters.entries()
    # Retried with backoff (1 s, 2 s ...) while a retry could still come in time, then dead-lettered as expired
    # at once, rather than retried past the expiry or until its retries ran out.
    assert (letter.reason, letter.channels) == ("expired", ["sms"])
    assert 1 <= len(attempts) == letter.attempts < 6
    assert all(at < before + 2 for at in attempts)
    assert kinds.sent == [(letter.notification_id, "email")]  # email went out on the first attempt


def test_the_message_carries_its_expiry_from_notify(kinds, user, redis_client):
    before = time.time()
    notify(user, "login.code", entity_id="login-3")
    message = json.loads(redis_client.rpop("critical"))
    _args, kwargs, _embed = json.loads(base64.b64decode(message["body"]))
    assert before + 1 - 0.001 <= kwargs["expires_at"] <= time.time() + 1.001  # stamped to the millisecond
    assert "expires_at" not in message["headers"]["kwargsrepr"]


def test_a_replayed_expired_letter_is_expired_again_not_sent(kinds, user):
    notify(user, "login.code", entity_id="login-4")
    time.sleep(1.2)  # no worker took it within its second: the test is about that expiry
    with start():
        wait_for(lambda: deadletters.size() == 1)
        [letter] = deadletters.entries()
        assert deadletters.replay(letter) == deadletters.REPLAYED
        wait_for(lambda: deadletters.size() == 1 and deadletters.entries()[0].at > letter.at)
    assert kinds.sent == []


def test_a_digest_expires_after_its_latest_event(kinds):
    kind = sluice_settings().kinds["login.code"]
    assert expiry.expires_at(kind, {"expires_at": 50.0}) == 50.0
    assert expiry.expires_at(kind, {"last_seen": 100.0, "first_seen": 10.0}, published_at=200.0) == 101.0
    assert expiry.expires_at(kind, {}, published_at=200.0) == 201.0
    assert expiry.expires_at(sluice_settings().kinds["task.comment"], {}, published_at=200.0) is None


def test_the_send_deadline_is_the_class_budget_or_the_expiry_if_sooner(kinds, settings):
    settings.SLUICE_QUEUES = {"critical": {"send_budget_s": 7}}
    message = Message(id="n", channel="sms", kind="k", klass="critical", user_id=1, entity_id="e", subject="", body="")
    assert send_deadline(message) - time.monotonic() == pytest.approx(7, abs=0.5)
    soon = Message(**{**vars(message), "expires_at": time.time() + 2})
    assert send_deadline(soon) - time.monotonic() == pytest.approx(2, abs=0.5)


@pytest.mark.parametrize(
    ("setting", "value", "words"),
    [
        ("SLUICE_KINDS", {"k": {"class": "critical", "channels": ["sms"], "expires_after_s": 0}}, "expires_after_s"),
        ("SLUICE_QUEUES", {"critical": {"send_budget_s": 0}}, "['send_budget_s'] must be an integer >= 1"),
        ("SLUICE_QUEUES", {"critical": {"send_budget_s": 600}}, "at most 120 (the send claim's lifetime)"),
        ("SLUICE_DELIVERY_RETENTION_DAYS", 0, "SLUICE_DELIVERY_RETENTION_DAYS must be an integer >= 1"),
    ],
)
def test_bad_settings_name_themselves(kinds, settings, setting, value, words):
    setattr(settings, setting, value)
    with pytest.raises(ImproperlyConfigured) as err:
        sluice_settings()
    assert words in str(err.value)
