"""A replicated class whose Redis user may not run WAIT: every write is Unavailable (ingest 503), the refusal is logged
once per process, a keyed retry sends nothing twice and succeeds once the user may, and `check` says so first."""

import json
import logging

import pytest
from django.contrib.auth import get_user_model
from django.core.checks import run_checks

from notifications import Outcome, Unavailable, notify
from notifications.kinds import all_kinds
from notifications.models import IngestToken
from pipeline.connections import get_redis
from pipeline.metrics import durability_field, read_counters
from pipeline.redis import keys
from pipeline.redis.addresses import acl_rules
from sluice_tools.redis_server import PrimaryWithReplica
from tests.integration.test_durability_replicated import Pair
from tests.waiting import wait_for

PASSWORD = "no-wait-for-me"
REPLICATED = {"durability": "replicated", "durability_timeout_ms": 300}
REFUSED = "refused WAIT"


def rules_without_wait():
    return [rule for rule in acl_rules(["critical", "routine", "background"]).split() if rule != "+wait"]


class LockedPair(Pair):
    """A primary and its replica (which the test may hang); the primary knows the user ``sluice``, with
    docs/redis.md's rules but ``wait``."""

    def start(self, timeout=10):
        super().start(timeout)
        with self.primary.admin() as admin:
            admin.execute_command("ACL", "SETUSER", "sluice", "on", f">{PASSWORD}", *rules_without_wait())
        return self

    def url(self):
        return f"redis://sluice:{PASSWORD}@127.0.0.1:{self.primary.port}/0"

    def allow_wait(self):
        with self.primary.admin() as admin:
            admin.execute_command("ACL", "SETUSER", "sluice", "+wait")


def start_pair(settings_url):
    from tests.system.test_reliability_redis import point_at

    found = LockedPair().start()
    return found, point_at(found.url() if settings_url else found.primary.url)


@pytest.fixture
def pair(redis_server):
    from tests.system.test_reliability_redis import point_back

    found, saved = start_pair(settings_url=True)
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


def refusals(caplog):
    return [r for r in caplog.records if r.name == "sluice.durability" and REFUSED in r.getMessage()]


@pytest.mark.django_db
@pytest.mark.expected_errors(REFUSED, "Service Unavailable: /api/notifications/")
def test_a_refused_wait_answers_503_and_a_keyed_retry_is_sent_once_then_confirmed(pair, settings, client, caplog):
    replicated(settings)
    caplog.set_level(logging.INFO, logger="sluice.durability")
    token = IngestToken(name="billing", kinds=sorted(all_kinds()))
    raw = token.set_new_token()
    token.save()
    user = get_user_model().objects.create_user("ada")
    body = json.dumps({"user": user.pk, "kind": "meeting.reminder", "entity_id": "m-1"})
    headers = {"HTTP_AUTHORIZATION": f"Bearer {raw}", "HTTP_IDEMPOTENCY_KEY": "order-1"}

    def post():
        return client.post("/api/notifications/", body, content_type="application/json", **headers)

    for _ in range(3):
        response = post()
        assert response.status_code == 503, response.content
        assert response.json()["error"] == "unavailable"
        assert int(response["Retry-After"]) >= 1
    primary = pair.primary.admin()
    # The first call's script ran (the event is queued, its key recorded); the retries only found the key.
    assert primary.llen("critical") == 1
    assert len(refusals(caplog)) == 1, "logged once per process, not per call"
    assert read_counters(get_redis()).get(durability_field("critical", "admission"), 0) == 3

    pair.allow_wait()
    response = post()
    assert response.status_code == 202, response.content
    assert response["Idempotent-Replayed"] == "true"
    assert primary.llen("critical") == 1, "nothing sent twice"
    # The replay's own write made WAIT wait for everything before it: the first call's event is on the replica.
    assert pair.replica.admin().llen("critical") == 1


@pytest.mark.django_db
@pytest.mark.expected_errors(REFUSED)
def test_notify_says_why_and_the_send_end_is_counted_not_logged_per_send(pair, settings, caplog):
    from pipeline.sending import claims

    replicated(settings)
    user = get_user_model()(pk=1)
    with pytest.raises(Unavailable, match=r"refused WAIT \(NoPermissionError: .*'wait'.*\).*\+wait"):
        notify(user, "meeting.reminder", entity_id="m-1")
    client = get_redis()
    client.set(keys.sent("n-1", "email"), "sending")
    claims.finish_send(keys.sent("n-1", "email"), "email", "critical", "failed", 0.01)
    assert client.get(keys.sent("n-1", "email")) is None  # the end happened on the primary
    assert read_counters(client).get(durability_field("critical", "end"), 0) == 1
    assert "ended unconfirmed" not in caplog.text
    assert len(refusals(caplog)) == 1


@pytest.fixture
def digest_pair(pair):
    """The digest's own Redis, with a replica (and a user that may run WAIT: only the class's may not)."""
    found = PrimaryWithReplica().start()
    try:
        yield found
    finally:
        found.stop()


@pytest.mark.django_db
@pytest.mark.expected_errors(REFUSED)
@pytest.mark.parametrize("how", ["refused", "unconfirmed"])
def test_a_fold_handed_over_is_folded_even_when_the_admission_is_not_confirmed(pair, digest_pair, settings, how):
    """admit_event.lua records the key as "folded" before the fold is handed to the digest's Redis: the hand-over must
    happen though the admission's WAIT was refused or timed out, or the keyed retry is told "folded" and the event
    is lost."""
    replicated(settings, capacity=1)
    if how == "unconfirmed":
        pair.allow_wait()
        pair.pause()
    settings.SLUICE_DIGEST = {"redis_url": digest_pair.primary.url}
    user = get_user_model()(pk=1)
    with pytest.raises(Unavailable):
        notify(user, "task.comment", entity_id="t-1")  # queued: the queue is full
    with pytest.raises(Unavailable):
        notify(user, "task.comment", entity_id="t-2", idempotency_key="k-2")
    folds = digest_pair.primary.admin()
    assert folds.zcard(keys.pending()) == 1, "the fold was handed over"
    pair.allow_wait()
    pair.resume()
    assert notify(user, "task.comment", entity_id="t-2", idempotency_key="k-2") is Outcome.FOLDED
    assert folds.zcard(keys.pending()) == 1
    [member] = folds.zrange(keys.pending(), 0, -1)
    assert int(folds.hget(keys.fold(member.decode()), "n")) == 1, "folded once"


@pytest.mark.django_db
@pytest.mark.expected_errors(REFUSED)
def test_check_fails_while_a_replicated_class_may_not_run_wait(pair, settings):
    replicated(settings)
    [error] = [e for e in run_checks() if e.id == "sluice.E008"]
    assert "may not run WAIT" in error.msg
    assert "critical" in error.msg
    assert PASSWORD not in error.msg
    assert "+wait" in error.hint
    pair.allow_wait()
    assert not [e for e in run_checks() if e.id in ("sluice.E008", "sluice.W004")]


@pytest.mark.django_db
def test_check_ignores_async_classes_and_warns_when_it_cannot_ask(pair, settings):
    settings.SLUICE_QUEUES = {}
    assert not [e for e in run_checks() if e.id in ("sluice.E008", "sluice.W004")]
    replicated(settings)
    pair.primary.stop()
    wait_for(lambda: pair.primary.process.poll() is not None, 10, what="the primary stopped")
    [warning] = [e for e in run_checks() if e.id == "sluice.W004"]
    assert "could not ask" in warning.msg
    assert PASSWORD not in warning.msg


@pytest.mark.django_db
@pytest.mark.expected_errors(REFUSED, "Service Unavailable: /api/notifications/")
def test_an_unknown_user_reads_the_same_as_a_real_one_while_wait_is_refused(pair, settings, client):
    """For a token without reveal, an unknown user's key goes through the class's Redis as a real one's: 503 alike."""
    replicated(settings)
    token = IngestToken(name="billing", kinds=sorted(all_kinds()))
    raw = token.set_new_token()
    token.save()
    real = get_user_model().objects.create_user("ada")
    answers = []
    for pk in (real.pk, 987654):
        body = json.dumps({"user": pk, "kind": "task.assigned", "entity_id": f"t-{pk}"})
        response = client.post(
            "/api/notifications/",
            body,
            content_type="application/json",
            HTTP_AUTHORIZATION=f"Bearer {raw}",
            HTTP_IDEMPOTENCY_KEY=f"k-{pk}",
        )
        answers.append((response.status_code, response.json()["error"]))
    assert answers == [(503, "unavailable")] * 2
