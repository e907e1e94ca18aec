"""Hostile input, the longest property tests: every wrong field, any input, any HTTP body (many generated cases)."""

import base64
import json

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from notifications import NotifyError, Outcome
from sluice_tools.demo_kinds import DEMO_KINDS
from tests.unit.test_hostile_input import (  # noqa: F401  (pytest finds the fixtures among them by name)
    BAD_ENTITY_IDS,
    BAD_KINDS,
    BAD_PAYLOADS,
    ERRORS,
    FUZZ,
    HTTP_BAD,
    JSON_VALUES,
    TEXT,
    WRONG,
    assert_clean_refusal,
    assert_nothing_grew,
    bad_users,
    call,
    dumps,
    entity_id_ok,
    footprint,
    mostly,
    send,
    valid,
)


@FUZZ
@given(data=st.data())
def test_each_wrong_field_gets_its_own_error_and_publishes_nothing(redis_client, user, valid, data):
    field = data.draw(st.sampled_from(sorted(ERRORS)))
    strategy = {"user": bad_users(user.pk), "kind": BAD_KINDS, "entity_id": BAD_ENTITY_IDS, "payload": BAD_PAYLOADS}
    fields = {**valid, field: data.draw(strategy[field], label=field)}
    before = footprint(redis_client)
    with pytest.raises(ERRORS[field]):
        call(fields)
    assert_nothing_grew(before, footprint(redis_client))


@FUZZ
@given(
    who=mostly(st.just("pk"), WRONG | st.integers() | TEXT),
    kind=mostly(st.sampled_from(sorted(DEMO_KINDS)), BAD_KINDS),
    entity_id=mostly(TEXT | st.integers(), WRONG),
    payload=mostly(st.none() | st.dictionaries(TEXT, JSON_VALUES, max_size=5), BAD_PAYLOADS),
)
def test_any_input_is_an_outcome_or_a_notify_error(redis_client, user, who, kind, entity_id, payload):
    fields = {"user": user.pk if who == "pk" else who, "kind": kind, "entity_id": entity_id, "payload": payload}
    before = footprint(redis_client)
    try:
        outcome = call(fields)
    except NotifyError as exc:
        event(type(exc).__name__)
        assert_nothing_grew(before, footprint(redis_client))
        return
    event("accepted")
    assert isinstance(outcome, Outcome)
    assert entity_id_ok(entity_id)
    # What was queued is exactly what was sent: no separator or escape mangled it on the way.
    queue = DEMO_KINDS[kind]["class"]
    message = json.loads(redis_client.lindex(queue, 0))
    kwargs = json.loads(base64.b64decode(message["body"]))[1]
    assert kwargs["entity_id"] == str(entity_id)
    assert kwargs["payload"] == json.loads(json.dumps(payload or {}))


@FUZZ
@given(data=st.data())
def test_http_wrong_type_for_each_field_is_a_4xx_naming_it(redis_client, valid, send, data):
    field = data.draw(st.sampled_from(sorted(HTTP_BAD)))
    strategy, code = HTTP_BAD[field]
    body = {**valid, field: data.draw(strategy, label=field)}
    before = footprint(redis_client)
    status = 403 if code == "kind_not_allowed" else 400
    assert assert_clean_refusal(send(dumps(body)), (status,))["error"] == code
    assert_nothing_grew(before, footprint(redis_client))


@FUZZ
@given(
    body=st.one_of(
        st.binary(max_size=500),
        JSON_VALUES.map(dumps),
        st.fixed_dictionaries(
            {},
            optional={"user": JSON_VALUES, "kind": JSON_VALUES, "entity_id": JSON_VALUES, "payload": JSON_VALUES},
        ).map(dumps),
        st.tuples(st.integers(1, 20_000), st.sampled_from("[{")).map(lambda t: t[1] * t[0] + "]}"[t[1] == "{"] * t[0]),
        st.integers(10_000, 60_000).map(lambda n: "[" + "0," * n + "0]"),
    ),
    content_type=st.sampled_from(["application/json"] * 4 + ["text/plain", "application/json; charset=utf-16", ""]),
)
def test_http_any_body_is_202_or_a_clean_json_4xx(redis_client, send, body, content_type):
    before = footprint(redis_client)
    response = send(body, content_type)
    event(f"HTTP {response.status_code}")
    if response.status_code == 202:
        assert json.loads(response.content)["outcome"] in set(Outcome)
        return
    assert_clean_refusal(response)
    assert_nothing_grew(before, footprint(redis_client))
