"""Issue 38 over HTTP: POST /api/notifications/ with "users" fans one event out to many users: 202 with the counts,
the rejected users of a critical kind, the unknown ones for a token that may see them; the bound; the rate charged
per user; Idempotency-Key per user."""

import pytest

from notifications.ingest.many import MAX_USERS

from .test_ingest import error_of, make_token, post  # noqa: F401  (fixtures)

pytestmark = pytest.mark.django_db


@pytest.fixture
def users(django_user_model):
    return [django_user_model.objects.create_user(f"m{i}", email=f"m{i}@example.com") for i in range(5)]


def body(users, kind="board.updated", **fields):
    return {"users": [u if isinstance(u, int) else u.pk for u in users], "kind": kind, "entity_id": "b1", **fields}


def test_users_fan_out_and_answer_the_counts(post, make_token, users, redis_client):  # noqa: F811
    _token, secret = make_token()
    answer = post(body([*users, 987654]), secret)
    assert answer.status_code == 202, answer.content
    assert answer.json() == {"users": 6, "counts": {"accepted": 5}, "unknown": [987654]}
    assert redis_client.llen("background") == 5


def test_a_token_that_may_not_see_details_reads_every_user_as_accepted(post, make_token, users, redis_client):  # noqa: F811
    _token, secret = make_token(reveal_details=False)
    answer = post(body([*users, 987654]), secret)
    assert answer.json() == {"users": 6, "counts": {"accepted": 6}}  # the unknown one too: nothing to probe
    assert redis_client.llen("background") == 5


@pytest.mark.expected_errors("users of a notify_many rejected")
def test_a_critical_fan_out_names_the_users_it_could_not_admit(post, make_token, users, settings):  # noqa: F811
    settings.SLUICE_QUEUES = {"critical": {"capacity": 3, "wait_ms": 50}}
    _token, secret = make_token()
    answer = post(body(users, kind="meeting.reminder"), secret)
    assert answer.status_code == 202
    found = answer.json()
    assert found["counts"] == {"accepted": 3}
    assert found["rejected"] == [u.pk for u in users[3:]]
    assert int(answer["Retry-After"]) >= 1


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"users": []}, "non-empty list"),
        ({"users": list(range(1, MAX_USERS + 2))}, f"the limit is {MAX_USERS}"),
        ({"users": [1, {"id": 2}]}, "got a dict"),
        ({"users": [1], "user": 1}, "not both"),
    ],
)
def test_bad_users_are_a_400_naming_the_problem(post, make_token, fields, words, redis_client):  # noqa: F811
    _token, secret = make_token()
    detail = error_of(post({"kind": "board.updated", "entity_id": "b1", **fields}, secret), 400, "invalid_request")
    assert words in detail
    assert redis_client.llen("background") == 0


def test_the_tokens_rate_is_charged_per_user(post, make_token, users, redis_client):  # noqa: F811
    _token, secret = make_token(rate_per_second=0.01, burst=3)
    assert post(body(users), secret).status_code == 202  # 5 users from a full bucket of 3: allowed, and in debt
    refused = post(body(users[:1]), secret)
    assert refused.status_code == 429
    assert 290 <= int(refused["Retry-After"]) <= 301  # the debt of 2 and one request: 3 tokens at 0.01/s


def test_an_idempotency_key_applies_per_user(post, make_token, users, redis_client):  # noqa: F811
    _token, secret = make_token()
    first = post(body(users[:3]), secret, HTTP_IDEMPOTENCY_KEY="move-7")
    assert first.json()["counts"] == {"accepted": 3}
    again = post(body(users), secret, HTTP_IDEMPOTENCY_KEY="move-7")
    assert again.json() == {"users": 5, "counts": {"accepted": 5}, "replayed": 3}
    assert redis_client.llen("background") == 5
