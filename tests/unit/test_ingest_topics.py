"""Issue 38 over HTTP: POST /api/notifications/ with "topic" records a fan-out of the topic in the token's service
namespace and answers 202 with its job and subscriber count; "topic" beside "user" or "users" is a 400; a bad topic is
a 400 naming it; an Idempotency-Key returns the first job; the token is charged one request a job."""

import pytest

from notifications import subscribe
from notifications.topics.models import TopicFanout

from .test_ingest import error_of, make_token, post  # noqa: F401  (fixtures)

pytestmark = pytest.mark.django_db


@pytest.fixture
def users(django_user_model):
    return [django_user_model.objects.create_user(f"t{i}", email=f"t{i}@example.com") for i in range(3)]


def body(topic="board:b1", **fields):
    return {"topic": topic, "kind": "board.updated", "entity_id": "b1", **fields}


def test_a_topic_in_the_service_namespace_answers_its_job(post, make_token, users, redis_client):  # noqa: F811
    token, secret = make_token()
    subscribe(f"{token.service}:board:b1", users)
    subscribe("board:b1", users[:1])  # the host's own topic of that name: not the service's
    answer = post(body(payload={"title": "Moved"}), secret)
    assert answer.status_code == 202, answer.content
    job = TopicFanout.objects.get()
    assert answer.json() == {"job": job.pk, "topic": "board:b1", "subscribers": 3}
    assert (job.topic, job.entity_id, job.scope) == (f"{token.service}:board:b1", f"{token.service}:b1", job.scope)
    assert job.scope == f"ingest:{token.service}"


def test_an_idempotency_key_answers_the_first_job_again(post, make_token, users, redis_client):  # noqa: F811
    token, secret = make_token()
    subscribe(f"{token.service}:board:b1", users)
    first = post(body(), secret, HTTP_IDEMPOTENCY_KEY="k1")
    again = post(body(), secret, HTTP_IDEMPOTENCY_KEY="k1")
    assert again.json() == first.json()
    assert again["Idempotent-Replayed"] == "true"
    assert TopicFanout.objects.count() == 1


@pytest.mark.parametrize(
    ("fields", "code", "words"),
    [
        ({"user": 1}, "invalid_request", "not both"),
        ({"users": [1]}, "invalid_request", "not both"),
        ({"topic": ""}, "invalid_topic", "must not be empty"),
        ({"topic": ["a"]}, "invalid_topic", "must be a string"),
        ({"topic": "a" * 200}, "invalid_topic", "the limit for this token is"),
        ({"topic": "a\u0000b"}, "invalid_topic", "control characters"),
        ({"kind": "no.such.kind"}, "kind_not_allowed", "may not send"),
    ],
)
def test_a_bad_topic_request_is_a_400_and_records_nothing(post, make_token, fields, code, words, redis_client):  # noqa: F811
    _token, secret = make_token()
    status = 403 if code == "kind_not_allowed" else 400
    assert words in error_of(post(body(**fields), secret), status, code)
    assert not TopicFanout.objects.exists()


def test_a_topic_costs_one_request_of_the_token_whatever_its_size(post, make_token, users, redis_client):  # noqa: F811
    token, secret = make_token(rate_per_second=0.001, burst=2)
    subscribe(f"{token.service}:board:b1", users)
    assert post(body(), secret).status_code == 202
    assert post(body(), secret).status_code == 202
    assert post(body(), secret).status_code == 429
