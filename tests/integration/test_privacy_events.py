"""No personal data reaches Flower: every publish of sluice.send.* carries the redacted repr, end to end.

A real worker with task events on sends, retries, requeues (the channel gate), dead-letters and sends a replay,
while the test records two things on the test Redis: every Celery event, as Flower receives them
(app.events.Receiver), and every command Redis executes (MONITOR), which holds every raw message and every
event as published. Seeded values (the user id, the entity id, a payload value) must appear in neither: not in
an event's fields, the exception text of task-retried or task-failed included, and not in any message header.
The message bodies carry them base64-encoded, because the worker needs them; the dead letters keep them for
replay, behind the admin's permissions.
"""

import json
import re
import threading

import pytest
from celery.contrib.testing.worker import start_worker

from notifications import notify
from pipeline.broker import deadletters
from pipeline.celery import app
from tests import scripted
from tests.waiting import wait_for

SCRIPTED = "tests.scripted.ScriptedChannel"
USER_PK = 987_654_321
ENTITY = "ent-4f1d2c9e"
SECRET = "pay-7b3e0a61"
REDACTED = re.compile(r"\{'kind': '[a-z_.]+'(, 'count': \d+)?\}")
# A message's kwargsrepr as MONITOR prints it: inside a quoted argument, so its own quotes are escaped.
KWARGSREPR = re.compile(r'\\"kwargsrepr\\": ?\\"(.*?)\\"')
ARGSREPR = re.compile(r'\\"argsrepr\\": ?\\"(.*?)\\"')


# One quoted argument of a MONITOR line; MONITOR escapes quotes, backslashes and bytes (\xNN) inside it.
ARGUMENT = re.compile(r'"((?:[^"\\]|\\.)*)"')


def messages_in(line):
    """The kombu envelopes among a MONITOR line's arguments (JSON objects with headers and a body)."""
    for argument in ARGUMENT.findall(line):
        if '\\"headers\\"' not in argument:
            continue
        text = argument.encode("latin-1", "backslashreplace").decode("unicode_escape")
        try:
            envelope = json.loads(text)
        except ValueError:
            continue
        if isinstance(envelope, dict) and "headers" in envelope:
            yield envelope


class Recorder:
    """Celery events (as Flower gets them) and Redis's MONITOR stream, each read by a thread of its own."""

    def __init__(self, client):
        self.events, self.commands = [], []
        self.client = client
        self.receiver = None
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._events, daemon=True)]
        self.threads.append(threading.Thread(target=self._monitor, args=(client.monitor(),), daemon=True))

    def _events(self):
        with app.connection_for_read() as connection:
            self.receiver = app.events.Receiver(connection, handlers={"*": self.events.append})
            self.receiver.capture(limit=None, timeout=None, wakeup=False)

    def _monitor(self, monitor):
        with monitor:
            while not self.stop.is_set():
                response = monitor.connection.read_response()
                self.commands.append(response.decode("utf-8", "replace") if isinstance(response, bytes) else response)

    def __enter__(self):
        for thread in self.threads:
            thread.start()
        # Events are Redis pub/sub: nothing published before the receiver subscribed reaches it.
        dispatcher = app.events.Dispatcher(app.connection_for_write(), enabled=True)
        try:
            wait_for(lambda: self._probe(dispatcher), timeout=20, what="the event receiver subscribed")
        finally:
            dispatcher.close()
        return self

    def _probe(self, dispatcher):
        dispatcher.send("sluice-test-probe")
        return any(e.get("type") == "sluice-test-probe" for e in self.events)

    def __exit__(self, *exc):
        self.stop.set()
        if self.receiver is not None:
            self.receiver.should_stop = True
        self.client.ping()  # wakes the monitor thread, which then sees stop
        for thread in self.threads:
            thread.join(timeout=10)


@pytest.fixture
def seeded_user(db, django_user_model):
    return django_user_model.objects.create_user("grace", pk=USER_PK, email="grace@example.com", password="x")


@pytest.fixture
def worker(redis_client, settings, monkeypatch):
    """A worker on every queue; push is rate-limited to one send a second, so a second push goes back to the
    end of its queue (GateTimeout); retries without waiting."""
    settings.SLUICE_CHANNELS = {
        "email": {"backend": SCRIPTED},
        "sms": {"backend": SCRIPTED},
        "push": {"backend": SCRIPTED, "rate_per_s": 1, "burst": 1, "max_wait_ms": 1},
    }
    monkeypatch.setattr("pipeline.sending.endings.MAX_BACKOFF_S", 0)
    scripted.reset()
    with start_worker(
        app,
        pool="threads",
        concurrency=1,
        perform_ping_check=False,
        queues=["critical", "routine", "background"],
        loglevel="WARNING",
        shutdown_timeout=30,
    ):
        yield scripted
    scripted.reset()


def sent(notification_id=None):
    return [nid for nid, _channel in scripted.sent if notification_id in (None, nid)]


@pytest.mark.timeout(180)
def test_no_event_and_no_message_header_carries_personal_data(redis_client, seeded_user, worker):
    payload = {"title": SECRET}
    with Recorder(redis_client) as recorded:
        # First publish, sent at once.
        notify(seeded_user, "meeting.invitation", entity_id=ENTITY, payload=payload)
        wait_for(lambda: len(sent()) == 1)
        # A retry: the provider fails once.
        worker.plan["email"] = ["transient"]
        notify(seeded_user, "task.due_changed", entity_id=ENTITY, payload=payload)
        wait_for(lambda: len(sent()) == 2)
        # Requeued at the end of its queue: the push channel allows one send a second.
        notify(seeded_user, "board.updated", entity_id=ENTITY, payload=payload)
        notify(seeded_user, "meeting.participant_left", entity_id=ENTITY, payload=payload)
        wait_for(lambda: len(sent()) == 4)
        # Dead-lettered as permanent, then replayed from the dead letters.
        worker.plan["email"] = ["permanent"]
        notify(seeded_user, "task.comment", entity_id=ENTITY, payload=payload)
        wait_for(lambda: deadletters.size() == 1)
        [letter] = deadletters.entries()
        assert deadletters.replay(letter) == deadletters.REPLAYED
        wait_for(lambda: sent(letter.notification_id))
        # Retries exhausted: five retries, then the dead letters.
        worker.plan["email"] = ["transient"] * 6
        notify(seeded_user, "meeting.invitation", entity_id=ENTITY, payload=payload)
        wait_for(lambda: deadletters.size() == 1 and len(deadletters.entries(reason="retries_exhausted")) == 1)
        # Events travel apart from the sends: wait until the receiver has every task-retried of the run
        # (the provider's failure, the channel gate's requeues, the five retries of the last message).
        wait_for(lambda: sum(e["type"] == "task-retried" for e in recorded.events) >= 7, timeout=20)

    seeds = (str(USER_PK), ENTITY, SECRET)
    task_events = [e for e in recorded.events if e["type"].startswith("task-")]
    types = {e["type"] for e in task_events}
    assert {"task-received", "task-started", "task-succeeded", "task-retried"} <= types, types
    for event in task_events:
        text = json.dumps(event, default=str)
        assert not [s for s in seeds if s in text], event
        if event["type"] == "task-received":
            assert REDACTED.fullmatch(event["kwargs"]), event["kwargs"]
            assert event["args"] == "()"
    # Every publish of a send task, as Redis received it: admission, retries, requeues, the replay.
    reprs = [m for line in recorded.commands for m in KWARGSREPR.findall(line)]
    received = [e for e in task_events if e["type"] == "task-received"]
    assert len(reprs) >= len(received) >= 6 + 1 + 1 + 5, (len(reprs), len(received))
    assert [r for r in reprs if not REDACTED.fullmatch(r)] == []
    assert {m for line in recorded.commands for m in ARGSREPR.findall(line)} == {"()"}
    # Nothing in clear in any raw message either, as Redis received it (events included): every header of every
    # envelope, all but the base64 body the worker needs. (Redis itself holds user ids, entity ids and payloads
    # where Sluice needs them: the preferences' mirror, the fold store, the dead letters.)
    envelopes = [m for line in recorded.commands for m in messages_in(line)]
    assert len(envelopes) >= len(reprs)
    leaks = [m for m in envelopes if any(s in json.dumps({k: v for k, v in m.items() if k != "body"}) for s in seeds)]
    assert leaks == []
    print(
        f"{len(task_events)} task events ({', '.join(sorted(types))}), {len(reprs)} published messages: 0 seeded values"
    )


def test_celerys_own_retry_of_a_lost_worker_cannot_be_switched_on(settings):
    # It republishes with apply_async: no redacted repr, no ceiling. A lost critical child's message is requeued.
    from django.core.exceptions import ImproperlyConfigured

    from pipeline.conf import celery_overrides

    settings.SLUICE_CELERY = {"task_retry_on_worker_lost": True}
    with pytest.raises(ImproperlyConfigured, match="task_retry_on_worker_lost"):
        celery_overrides()
