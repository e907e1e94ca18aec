"""Issue 37 over HTTP: POST /api/notifications/ with send_at and key schedules (and moves), POST
/api/notifications/cancel/ cancels by kind and entity, both within the token's scope and namespace."""

import json
import time
from datetime import UTC, datetime

import pytest

from notifications.scheduling.models import ScheduledSend

from .test_ingest import event, make_token, post, raw  # noqa: F401  (fixtures)

pytestmark = pytest.mark.django_db
CANCEL = "/api/notifications/cancel/"


def rfc3339(seconds):
    return datetime.fromtimestamp(seconds, UTC).isoformat().replace("+00:00", "Z")


def test_send_at_and_key_schedule_and_move_within_the_services_namespace(post, raw, user, redis_client):  # noqa: F811
    when = time.time() + 600
    answer = post(event(user, send_at=rfc3339(when), key="10m"), raw)
    assert answer.status_code == 202, answer.content
    assert answer.json()["outcome"] == "scheduled"
    assert answer.json()["moved"] is False
    moved = post(event(user, send_at=rfc3339(when + 60), key="10m"), raw)
    assert moved.json()["moved"] is True
    [row] = ScheduledSend.objects.all()
    assert (row.entity_id, row.key, row.version) == ("billing:task_42", "10m", 2)
    assert redis_client.llen("routine") == 0


@pytest.mark.parametrize(
    ("send_at", "words"),
    [
        ("2026-12-03T09:50:00", "with its offset"),
        ("tomorrow", "RFC 3339"),
        (12, "RFC 3339"),
        ("2001-01-01T00:00:00Z", "in the past"),
    ],
)
def test_a_bad_send_at_is_a_400_naming_it(post, raw, user, redis_client, send_at, words):  # noqa: F811
    answer = post(event(user, send_at=send_at), raw)
    assert answer.status_code == 400
    assert answer.json()["error"] == "invalid_schedule"
    assert words in answer.json()["detail"]
    assert not ScheduledSend.objects.exists()


def test_a_critical_send_without_room_is_a_409_with_the_time_that_has_room(post, raw, user, redis_client, settings):  # noqa: F811
    settings.SLUICE_SCHEDULE = {"critical": {"rate_per_s": 1, "reservable": 1}}
    when = int(time.time()) + 600
    body = {"user": user.pk, "kind": "meeting.reminder", "send_at": rfc3339(when)}
    assert post({**body, "entity_id": "m1"}, raw).status_code == 202
    refused = post({**body, "entity_id": "m2"}, raw)
    assert refused.status_code == 409
    assert (refused.json()["error"], refused.json()["available_at"]) == ("rejected", rfc3339(when + 1))


def test_cancel_by_kind_and_entity_in_the_tokens_namespace(client, make_token, user, django_user_model, redis_client):  # noqa: F811
    _billing, billing = make_token("billing")
    _crm, crm = make_token("crm")
    bob = django_user_model.objects.create_user("bob")
    for who in (user, bob):
        for token in (billing, crm):
            body = event(who, send_at=rfc3339(time.time() + 600))
            client.post("/api/notifications/", json.dumps(body), content_type="application/json",
                        HTTP_AUTHORIZATION=f"Bearer {token}")  # fmt: skip

    def cancel(body, token):
        return client.post(
            CANCEL, json.dumps(body), content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}"
        )

    done = cancel({"kind": "task.assigned", "entity_id": "task_42", "users": [bob.pk]}, billing)
    assert (done.status_code, done.json()) == (200, {"cancelled": 1})
    assert cancel({"kind": "task.assigned", "entity_id": "task_42"}, billing).json() == {"cancelled": 1}
    # The other service's sends of the same entity id are its own.
    assert sorted(ScheduledSend.objects.values_list("entity_id", flat=True)) == ["crm:task_42", "crm:task_42"]


def test_cancel_needs_the_kind_in_scope_and_a_well_formed_body(client, make_token, redis_client):  # noqa: F811
    _token, secret = make_token("billing", kinds=["task.assigned"])

    def cancel(body):
        return client.post(
            CANCEL, json.dumps(body), content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {secret}"
        )

    assert cancel({"kind": "meeting.reminder", "entity_id": "m1"}).status_code == 403
    assert cancel({"kind": "task.assigned"}).json()["detail"] == "missing field(s): entity_id"
    assert cancel({"kind": "task.assigned", "entity_id": "t", "users": list(range(1001))}).status_code == 400
    assert cancel({"kind": "task.assigned", "entity_id": "t", "everyone": True}).status_code == 400
    assert client.post(CANCEL, "{}", content_type="application/json").status_code == 401
