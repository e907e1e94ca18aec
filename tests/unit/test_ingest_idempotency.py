"""The ingest API's Idempotency-Key header: a repeat answers what the first answered and publishes nothing."""

import pytest

from pipeline.metrics import idempotent_replay_field, read_counters
from pipeline.redis import keys

from .test_ingest import error_of, event, make_token, post  # noqa: F401  (fixtures)


def keyed(post, body, raw, key):  # noqa: F811
    return post(body, raw, HTTP_IDEMPOTENCY_KEY=key)


@pytest.mark.parametrize("reveal", [True, False])
def test_a_repeat_answers_the_first_answer_and_publishes_nothing(redis_client, user, make_token, post, reveal):  # noqa: F811
    raw = make_token(reveal_details=reveal)[1]
    first = keyed(post, event(user), raw, "req-1")
    second = keyed(post, event(user), raw, "req-1")
    assert (first.status_code, first.content) == (second.status_code, second.content)
    assert first.status_code == 202
    assert "Idempotent-Replayed" not in first
    assert second["Idempotent-Replayed"] == "true"
    assert redis_client.llen("routine") == 1
    assert read_counters()[idempotent_replay_field("routine")] == 1


def test_an_unknown_users_key_is_recorded_and_replayed_as_a_real_users(redis_client, user, make_token, post):  # noqa: F811
    """A token without reveal must not tell real user ids from unknown ones by Idempotent-Replayed either."""
    raw = make_token(reveal_details=False)[1]
    answers = {}
    for who, pk in (("known", user.pk), ("unknown", 987654)):
        body = event(user, kind="task.assigned", entity_id=f"t-{who}")
        body["user"] = pk
        first, second = (keyed(post, body, raw, f"req-{who}") for _ in range(2))
        answers[who] = [(r.status_code, r.content, r.get("Idempotent-Replayed")) for r in (first, second)]
    assert answers["known"] == answers["unknown"]
    assert answers["unknown"][1][2] == "true"
    assert redis_client.llen("routine") == 1, "only the real user's event was published"
    assert redis_client.get(keys.idempotency("ingest:billing", "req-unknown")) == b"accepted"
    assert read_counters()[idempotent_replay_field("routine")] == 2
    # The key alone decides, as for a real user: a real user's event sent with that key later is a replay.
    body = event(user, kind="task.assigned", entity_id="t-later")
    assert keyed(post, body, raw, "req-unknown")["Idempotent-Replayed"] == "true"
    assert redis_client.llen("routine") == 1


def test_a_folded_answer_is_replayed_as_folded(redis_client, user, make_token, post, settings):  # noqa: F811
    settings.SLUICE_QUEUES = {"routine": {"capacity": 1}}
    raw = make_token()[1]
    assert post(event(user, kind="task.comment", entity_id="filler"), raw).json() == {"outcome": "accepted"}
    first = keyed(post, event(user, kind="task.comment"), raw, "req-1")
    redis_client.delete("routine")  # room again: the replay still answers what the first call came to
    second = keyed(post, event(user, kind="task.comment"), raw, "req-1")
    assert first.json() == second.json() == {"outcome": "folded"}
    assert redis_client.llen("routine") == 0


def test_each_service_has_its_own_scope_and_its_tokens_share_it(redis_client, user, make_token, post):  # noqa: F811
    billing = make_token("billing")[1]
    billing_rotated = make_token("billing rotated", service="billing")[1]
    crm = make_token("crm")[1]
    assert "Idempotent-Replayed" not in keyed(post, event(user), billing, "k")
    assert "Idempotent-Replayed" not in keyed(post, event(user), crm, "k")
    assert keyed(post, event(user), billing_rotated, "k")["Idempotent-Replayed"] == "true"
    assert redis_client.llen("routine") == 2
    assert redis_client.exists(keys.idempotency("ingest:billing", "k"), keys.idempotency("ingest:crm", "k")) == 2


def test_without_the_header_every_request_publishes(redis_client, user, make_token, post):  # noqa: F811
    raw = make_token()[1]
    post(event(user), raw)
    post(event(user), raw)
    assert redis_client.llen("routine") == 2


@pytest.mark.expected_errors("for the whole wait budget: rejecting", "Service Unavailable: /api/notifications/")
def test_a_rejected_request_records_nothing_and_its_retry_is_published(
    redis_client,
    user,
    make_token,  # noqa: F811
    post,  # noqa: F811
    settings,
):
    settings.SLUICE_QUEUES = {"critical": {"capacity": 1, "wait_ms": 0}}
    raw = make_token()[1]
    assert post(event(user, kind="meeting.reminder", entity_id="filler"), raw).status_code == 202
    error_of(keyed(post, event(user, kind="meeting.reminder"), raw, "k"), 503, "rejected")
    redis_client.rpop("critical")
    retried = keyed(post, event(user, kind="meeting.reminder"), raw, "k")
    assert retried.status_code == 202
    assert "Idempotent-Replayed" not in retried
    assert redis_client.llen("critical") == 1


@pytest.mark.parametrize(
    ("header", "words"),
    [("", "must not be empty"), ("x" * 256, "256 characters; the limit is 255"), ("a\tb", "control characters")],
)
def test_a_bad_header_is_400_naming_it(redis_client, user, make_token, post, header, words):  # noqa: F811
    raw = make_token()[1]
    detail = error_of(keyed(post, event(user), raw, header), 400, "invalid_idempotency_key")
    assert "Idempotency-Key header" in detail
    assert words in detail
    assert redis_client.llen("routine") == 0
