"""Ingest tokens are scoped: kinds listed (none listed: none), optionally payload fields; answers that do not
confirm which users or kinds exist; and each service's entity ids in a namespace of its own, so that one service
cannot overwrite another's pending digest.

The tests make tokens with the fields every version of IngestToken has (name, kinds), so that they run, and fail,
against the code before scopes existed.
"""

import json

import pytest

from notifications.models import IngestToken
from pipeline.redis import keys

URL = "/api/notifications/"


@pytest.fixture
def token(db):
    def make(name="billing", **fields):
        row = IngestToken(name=name, **fields)
        raw = row.set_new_token()
        row.save()
        return raw

    return make


@pytest.fixture
def post(client):
    def send(raw, **event):
        return client.post(URL, json.dumps(event), content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {raw}")

    return send


def answer(response):
    return response.status_code, json.loads(response.content)


def test_a_token_that_lists_no_kinds_may_send_none(redis_client, user, token, post):
    raw = token(kinds=[])
    for kind in ("task.assigned", "meeting.reminder", "board.updated"):
        status, body = answer(post(raw, user=user.pk, kind=kind, entity_id="t1"))
        assert (status, body["error"]) == (403, "kind_not_allowed"), kind
    assert not any(redis_client.llen(q) for q in ("critical", "routine", "background"))


def test_a_forbidden_kind_reads_the_same_whether_it_exists_or_not(redis_client, user, token, post):
    raw = token(kinds=["meeting.reminder"])
    exists = answer(post(raw, user=user.pk, kind="task.assigned", entity_id="t1"))
    invented = answer(post(raw, user=user.pk, kind="task.nope", entity_id="t1"))
    assert exists[0] == invented[0] == 403
    assert exists[1]["error"] == invented[1]["error"] == "kind_not_allowed"
    assert exists[1]["detail"].replace("task.assigned", "X") == invented[1]["detail"].replace("task.nope", "X")


def test_an_unknown_user_reads_the_same_as_a_user_who_exists(redis_client, user, token, post):
    raw = token(kinds=["task.assigned"])
    known = answer(post(raw, user=user.pk, kind="task.assigned", entity_id="t1", payload={"title": "Q3"}))
    unknown = answer(post(raw, user=987654, kind="task.assigned", entity_id="t1", payload={"title": "Q3"}))
    assert known == unknown == (202, {"outcome": "accepted"})
    assert redis_client.llen("routine") == 1  # only the real user's event was published


def test_one_service_cannot_overwrite_anothers_pending_digest(redis_client, user, token, post, settings):
    settings.SLUICE_QUEUES = {"routine": {"capacity": 1}}
    billing, crm = token("billing", kinds=["task.comment"]), token("crm", kinds=["task.comment"])
    assert post(billing, user=user.pk, kind="task.comment", entity_id="filler").status_code == 202  # fills the queue
    assert post(billing, user=user.pk, kind="task.comment", entity_id="t1", payload={"title": "Invoice 7 paid"})
    assert post(crm, user=user.pk, kind="task.comment", entity_id="t1", payload={"title": "Click evil.example"})
    folds = {}
    for member in redis_client.zrange(keys.pending(), 0, -1):
        fold = redis_client.hgetall(keys.fold(member.decode()))
        folds[json.loads(member)[2]] = (int(fold[b"n"]), json.loads(fold[b"p"])["title"])
    assert folds == {"billing:t1": (1, "Invoice 7 paid"), "crm:t1": (1, "Click evil.example")}


def test_tokens_of_one_service_share_its_namespace(redis_client, user, db, post, settings):
    settings.SLUICE_QUEUES = {"routine": {"capacity": 1}}
    old, new = (IngestToken(name=name, service="billing", kinds=["task.comment"]) for name in ("billing", "billing 2"))
    raws = [old.set_new_token(), new.set_new_token()]
    old.save(), new.save()
    assert post(raws[0], user=user.pk, kind="task.comment", entity_id="filler").status_code == 202
    for raw in raws:  # a rotation: the old token and its successor fold into one digest
        assert post(raw, user=user.pk, kind="task.comment", entity_id="t1").status_code == 202
    (member,) = redis_client.zrange(keys.pending(), 0, -1)
    assert json.loads(member)[2] == "billing:t1"
    assert redis_client.hget(keys.fold(member.decode()), "n") == b"2"


def test_payload_fields_can_be_limited(redis_client, user, db, post):
    limited = IngestToken(name="billing", kinds=["task.assigned"], payload_fields=["title"])
    raw = limited.set_new_token()
    limited.save()
    extra = {"title": "a", "url": "x"}
    status, body = answer(post(raw, user=user.pk, kind="task.assigned", entity_id="t1", payload=extra))
    assert (status, body["error"]) == (403, "payload_field_not_allowed")
    assert "'url'" in body["detail"]
    assert post(raw, user=user.pk, kind="task.assigned", entity_id="t1", payload={"title": "a"}).status_code == 202
    assert post(raw, user=user.pk, kind="task.assigned", entity_id="t1").status_code == 202


def test_the_namespace_counts_against_the_entity_id_limit(redis_client, user, token, post):
    raw = token("billing", kinds=["task.assigned"])
    room = 200 - len("billing:")
    assert post(raw, user=user.pk, kind="task.assigned", entity_id="e" * room).status_code == 202
    status, body = answer(post(raw, user=user.pk, kind="task.assigned", entity_id="e" * (room + 1)))
    assert (status, body["error"]) == (400, "invalid_entity_id")
    assert f"the limit for this token is {room}" in body["detail"]
    for bad in ("", " ", None, ["x"]):  # notify()'s own answer, not a namespaced one
        status, body = answer(post(raw, user=user.pk, kind="task.assigned", entity_id=bad))
        assert (status, body["error"]) == (400, "invalid_entity_id")


def test_a_token_may_be_allowed_to_see_unknown_users_and_outcomes(redis_client, user, db, post, settings):
    settings.SLUICE_QUEUES = {"routine": {"capacity": 1}}
    row = IngestToken(name="ops", kinds=["task.comment"], reveal_details=True)
    raw = row.set_new_token()
    row.save()
    assert answer(post(raw, user=987654, kind="task.comment", entity_id="t1"))[1]["error"] == "unknown_user"
    assert answer(post(raw, user=user.pk, kind="task.comment", entity_id="t1")) == (202, {"outcome": "accepted"})
    assert answer(post(raw, user=user.pk, kind="task.comment", entity_id="t1")) == (202, {"outcome": "folded"})


@pytest.mark.parametrize("state", ["out of memory", "read-only"])
@pytest.mark.expected_errors("Service Unavailable: /api/notifications/")
def test_a_full_or_read_only_redis_is_503_never_500(redis_client, user, token, post, state):
    raw = token(kinds=["meeting.reminder"])
    try:
        if state == "out of memory":
            redis_client.config_set("maxmemory", 1)  # noeviction is the default policy: every write is refused
        else:
            redis_client.execute_command("REPLICAOF", "127.0.0.1", "1")  # a replica of nothing: read-only
        status, body = answer(post(raw, user=user.pk, kind="meeting.reminder", entity_id="m1"))
    finally:
        redis_client.config_set("maxmemory", 0)
        redis_client.execute_command("REPLICAOF", "NO", "ONE")
    assert (status, body["error"]) == (503, "unavailable")


@pytest.mark.django_db(transaction=True)
def test_the_upgrade_keeps_what_existing_tokens_could_send(settings):
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    before = [("sluice_notifications", "0004_prune_schedule")]
    after = [("sluice_notifications", "0005_ingest_token_scopes")]
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    Old = executor.loader.project_state(before).apps.get_model("sluice_notifications", "IngestToken")
    Old.objects.create(name="Billing Service", digest="a" * 64, prefix="slk_a", kinds=[])
    Old.objects.create(name="crm", digest="b" * 64, prefix="slk_b", kinds=["task.comment"])
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(after)
    rows = {t.name: t for t in IngestToken.objects.all()}
    # Back to the latest migration: the next tests of this process use this database (the inbox's table, 0007).
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())
    assert rows["Billing Service"].kinds == sorted(settings.SLUICE_KINDS)  # every kind it could send before
    assert rows["Billing Service"].service == "billing-service"
    assert rows["crm"].kinds == ["task.comment"]
    assert not rows["crm"].reveal_details
