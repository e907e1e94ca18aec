"""durability "replicated": a real primary and replica; admission, a fold and a send's end WAIT for the replica in
the same round trip, and notify() raises Unavailable (ingest 503) when the replica does not confirm in time."""

import json
import os
import signal
import time

import pytest
from django.contrib.auth import get_user_model

from notifications import Outcome, Unavailable, notify
from notifications.kinds import all_kinds
from notifications.models import IngestToken
from pipeline.connections import get_redis
from pipeline.metrics import durability_field, read_counters
from pipeline.redis import keys
from pipeline.sending import claims
from sluice_tools.bench.admission_bench import RoundTrips
from sluice_tools.redis_server import PrimaryWithReplica
from tests.waiting import wait_for

TIMEOUT_MS = 300
REPLICATED = {"durability": "replicated", "durability_timeout_ms": TIMEOUT_MS}


class Pair(PrimaryWithReplica):
    """A primary and its replica, which the test may hang."""

    def stop(self):
        self.resume()
        super().stop()

    def pause(self):
        """The replica hangs (SIGSTOP): connected, never acknowledging, as a replica stuck on a slow disk."""
        os.kill(self.replica.process.pid, signal.SIGSTOP)

    def resume(self):
        if self.replica is not None and self.replica.process and self.replica.process.poll() is None:
            os.kill(self.replica.process.pid, signal.SIGCONT)


# Not on the settings fixture: set up after it, this one would point Sluice back beneath the test's overrides, which
# are then undone.
@pytest.fixture
def pair(redis_server):
    from tests.system.test_reliability_redis import point_at, point_back

    found = Pair().start()
    saved = point_at(found.primary.url)
    try:
        yield found
    finally:
        point_back(saved)
        get_redis()
        found.stop()


def replicated(settings, **routine):
    settings.SLUICE_QUEUES = {
        "critical": dict(REPLICATED),
        "routine": {**REPLICATED, **routine},
        "background": dict(REPLICATED),
    }


def unconfirmed(klass, step):
    return read_counters(get_redis()).get(durability_field(klass, step), 0)


@pytest.mark.django_db
def test_replicated_admission_is_on_the_replica_when_notify_returns_in_one_round_trip(pair, settings):
    replicated(settings)
    user = get_user_model()(pk=1)
    notify(user, "meeting.reminder", entity_id="warm-up")  # loads the script on this primary
    with RoundTrips() as trips:
        assert notify(user, "meeting.reminder", entity_id="m-1") == Outcome.ACCEPTED
    # Confirmed by WAIT: the replica holds the message already, nothing waited for here.
    assert pair.replica.admin().llen("critical") == 2
    assert trips.count == 1, "the script and WAIT go in one pipeline"


@pytest.mark.django_db
def test_a_fold_in_admission_is_confirmed_too(pair, settings):
    replicated(settings, capacity=1)
    user = get_user_model()(pk=1)
    assert notify(user, "task.comment", entity_id="t-1") == Outcome.ACCEPTED
    assert notify(user, "task.comment", entity_id="t-2") == Outcome.FOLDED
    assert pair.replica.admin().zcard(keys.pending()) == 1


@pytest.mark.django_db
def test_a_hung_replica_makes_notify_unavailable_within_the_timeout(pair, settings):
    replicated(settings, capacity=1)
    user = get_user_model()(pk=1)
    notify(user, "task.comment", entity_id="warm-up")
    pair.pause()
    for kind, entity in (("meeting.reminder", "m-1"), ("task.comment", "t-1")):
        began = time.monotonic()
        with pytest.raises(Unavailable, match=rf"not confirmed by 1 replica\(s\) within {TIMEOUT_MS} ms"):
            notify(user, kind, entity_id=entity)
        took = time.monotonic() - began
        assert TIMEOUT_MS / 1000 * 0.9 <= took < TIMEOUT_MS / 1000 + 1.0, took
    assert unconfirmed("critical", "admission") == 1
    assert unconfirmed("routine", "admission") == 1
    pair.resume()
    # Once the replica catches up, the same calls succeed again.
    assert notify(user, "meeting.reminder", entity_id="m-1") == Outcome.ACCEPTED


@pytest.mark.django_db
def test_a_replica_that_left_makes_notify_unavailable_and_async_is_unaffected(pair, settings):
    replicated(settings)
    user = get_user_model()(pk=1)
    pair.replica.admin().execute_command("REPLICAOF", "NO", "ONE")
    wait_for(lambda: pair.primary.admin().info("replication")["connected_slaves"] == 0, 10, what="the replica gone")
    with pytest.raises(Unavailable, match="not confirmed"):
        notify(user, "meeting.reminder", entity_id="m-1")
    # The same primary, async: acknowledged once the primary has it, as before.
    settings.SLUICE_QUEUES = {}
    began = time.monotonic()
    assert notify(user, "meeting.reminder", entity_id="m-2") == Outcome.ACCEPTED
    assert time.monotonic() - began < TIMEOUT_MS / 1000


@pytest.mark.django_db
def test_a_send_end_unconfirmed_is_counted_and_logged_never_failed(pair, settings, caplog):
    replicated(settings)
    client = get_redis()
    client.set(keys.sent("n-1", "email"), "sending")
    pair.pause()
    claims.finish_send(keys.sent("n-1", "email"), "email", "routine", "failed", 0.01)
    assert client.get(keys.sent("n-1", "email")) is None  # the end happened on the primary
    assert unconfirmed("routine", "end") == 1
    assert "ended unconfirmed by its replicas" in caplog.text


@pytest.fixture
def second_pair(pair):
    """The digest's own Redis, with a replica of its own."""
    found = Pair().start()
    try:
        yield found
    finally:
        found.stop()


@pytest.mark.django_db
def test_a_fold_on_the_digests_redis_is_confirmed_there(pair, second_pair, settings):
    replicated(settings, capacity=1)
    settings.SLUICE_DIGEST = {"redis_url": second_pair.primary.url}
    user = get_user_model()(pk=1)
    assert notify(user, "task.comment", entity_id="t-1") == Outcome.ACCEPTED
    assert notify(user, "task.comment", entity_id="t-2") == Outcome.FOLDED
    assert second_pair.replica.admin().zcard(keys.pending()) == 1
    second_pair.pause()
    with pytest.raises(Unavailable, match=rf"127.0.0.1:{second_pair.primary.port}/0: the fold was not confirmed"):
        notify(user, "task.comment", entity_id="t-3")
    assert unconfirmed("routine", "fold") == 1


@pytest.mark.django_db
@pytest.mark.expected_errors("Service Unavailable: /api/notifications/")
def test_ingest_answers_503_with_retry_after_when_the_replica_does_not_confirm(pair, settings, client):
    replicated(settings)
    token = IngestToken(name="billing", kinds=sorted(all_kinds()), reveal_details=True)
    raw = token.set_new_token()
    token.save()
    user = get_user_model().objects.create_user("ada")
    body = json.dumps({"user": user.pk, "kind": "meeting.reminder", "entity_id": "m-1"})
    auth = {"HTTP_AUTHORIZATION": f"Bearer {raw}"}
    assert client.post("/api/notifications/", body, content_type="application/json", **auth).status_code == 202
    pair.pause()
    response = client.post("/api/notifications/", body, content_type="application/json", **auth)
    assert response.status_code == 503, response.content
    assert response.json()["error"] == "unavailable"
    assert int(response["Retry-After"]) >= 1


@pytest.mark.django_db
def test_a_primary_without_the_script_loads_it_and_still_waits(pair, settings):
    """A restarted or newly promoted primary has no scripts (SCRIPT LOAD is not replicated): NOSCRIPT, load, again."""
    replicated(settings)
    user = get_user_model()(pk=1)
    notify(user, "meeting.reminder", entity_id="m-1")
    pair.primary.admin().script_flush()
    assert notify(user, "meeting.reminder", entity_id="m-2") == Outcome.ACCEPTED
    assert pair.replica.admin().llen("critical") == 2
