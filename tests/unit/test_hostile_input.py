"""Hostile input: notify() and POST /api/notifications/ refuse junk with a specific error and enqueue nothing."""

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from notifications import (
    InvalidEntityId,
    InvalidPayload,
    Outcome,
    PayloadTooLarge,
    UnknownKind,
    UnknownUser,
)
from notifications.models import IngestToken
from pipeline.redis import keys
from sluice_tools.demo_kinds import DEMO_KINDS

QUEUES = ("critical", "routine", "background", "celery")
URL = "/api/notifications/"
LIMIT = 16 * 1024
FUZZ = settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)
FEW = settings(FUZZ, max_examples=60)

# Text that breaks naive code: separators and Redis glob/key characters, controls, lone surrogates, odd Unicode.
SPECIAL = st.sampled_from(
    [
        *("|", ":", "*", "?", "[", "]", "{", "}", '"', "'", "\\", "\n", "\r", "\t", "\x00", "\x1f", "\x7f", "\x85"),
        *(
            "\ud800",
            "\udfff",
            "\u2028",
            "\ufeff",
            "\u200b",
            " ",
            "%",
            "$",
            "😀",
            "é",
            "\\u0000",
            "sluice:digest:",
            "|x|",
        ),
    ]
)
CHAR = st.characters(exclude_categories=())  # every code point, lone surrogates included
TEXT = st.one_of(st.lists(st.one_of(CHAR, SPECIAL), max_size=30).map("".join), st.text(CHAR, max_size=300))
SCALARS = st.none() | st.booleans() | st.integers() | st.floats() | TEXT
JSON_VALUES = st.recursive(
    SCALARS, lambda kids: st.lists(kids, max_size=4) | st.dictionaries(TEXT, kids, max_size=4), max_leaves=20
)
NOT_JSON = (
    st.binary(max_size=8) | st.tuples(st.integers()) | st.builds(object) | st.frozensets(st.integers(), max_size=2)
)
CONTAINERS = st.lists(SCALARS, max_size=3) | st.dictionaries(st.text(max_size=3), SCALARS, max_size=3)
# Wrong for every field (an int can be a pk or an entity id, and a dict can be a payload, so those come per field).
WRONG = st.none() | st.booleans() | st.floats() | st.lists(SCALARS, max_size=3) | NOT_JSON


def footprint(client):
    """Sizes of what a refused call must not grow: the class queues (sub-lists too) and every digest key."""
    sizes = {name: client.llen(name) for queue in QUEUES for name in keys.priority_lists(queue)}
    size_of = {b"hash": client.hlen, b"zset": client.zcard, b"set": client.scard, b"list": client.llen}
    for key in client.scan_iter(match=f"{keys.DIGEST_PREFIX}*", count=1000):
        sizes[key] = size_of.get(client.type(key), client.strlen)(key)
    return sizes


def assert_nothing_grew(before, after):
    grown = {k: (before.get(k, 0), v) for k, v in after.items() if v > before.get(k, 0)}
    assert not grown, f"a refused call left something behind: {grown}"


def entity_id_ok(entity_id):
    """The documented rule: a non-empty string (or int) of at most 200 characters, no controls, no lone surrogates."""
    if isinstance(entity_id, int) and not isinstance(entity_id, bool):
        entity_id = str(entity_id)
    return (
        isinstance(entity_id, str)
        and bool(entity_id.strip())
        and len(entity_id) <= 200
        and not any(ord(c) < 32 or ord(c) == 127 or 0xD800 <= ord(c) <= 0xDFFF for c in entity_id)
    )


def names_pk(value, pk):
    try:
        return int(value) == pk
    except (TypeError, ValueError):
        return False


def nested(depth, container):
    value = {}
    for _ in range(depth):
        value = {"a": value} if container == "dict" else [value]
    return value


# Per field, values that are certainly wrong, and the error each must raise.
def bad_users(pk):
    return (
        WRONG
        | CONTAINERS
        | st.integers(min_value=10**6)
        | st.integers(max_value=0)
        | TEXT.filter(lambda t: not names_pk(t, pk))
    )


BAD_KINDS = WRONG | CONTAINERS | st.integers() | TEXT.filter(lambda t: t not in DEMO_KINDS)
BAD_ENTITY_IDS = st.one_of(
    WRONG,
    st.dictionaries(st.text(max_size=3), SCALARS, max_size=3),
    st.integers(min_value=10**200),
    st.integers(max_value=-(10**199)),
    st.integers(min_value=10**4300, max_value=10**5000),  # over Python's int-to-str limit
    st.text(" \u3000\u2003", max_size=5),
    st.text(CHAR, min_size=201, max_size=400),
    st.tuples(TEXT, st.sampled_from(["\x00", "\n", "\x1f", "\x7f", "\ud800", "\udbff\udbff"]), TEXT).map("".join),
)
BAD_PAYLOADS = st.one_of(
    st.booleans(),
    st.floats(),
    st.lists(SCALARS, max_size=3),
    NOT_JSON,
    st.integers(),
    TEXT,
    st.dictionaries(TEXT, st.sampled_from([float("nan"), float("inf"), b"x", {1}, 10**5000]), min_size=1),
    st.dictionaries(st.tuples(st.integers()), SCALARS, min_size=1),
    st.builds(lambda t: {"t": t + "\ud800"}, TEXT),
    st.builds(lambda n: {"blob": "x" * n}, st.integers(LIMIT, 4 * LIMIT)),
    st.builds(nested, st.integers(2_000, 12_000), st.sampled_from(["dict", "list"])),
)
ERRORS = {"user": UnknownUser, "kind": UnknownKind, "entity_id": InvalidEntityId, "payload": InvalidPayload}


@pytest.fixture
def valid(user):
    return {"user": user.pk, "kind": "task.assigned", "entity_id": "task_42", "payload": {"title": "Q3"}}


def call(fields):
    from notifications import notify

    return notify(fields["user"], fields["kind"], entity_id=fields["entity_id"], payload=fields["payload"])


# notify()


def mostly(valid, hostile):
    """Three draws in four from ``valid``: so that all four fields are sometimes fine together."""
    return st.integers(0, 3).flatmap(lambda i: valid if i else hostile)


@pytest.mark.parametrize("container", ["dict", "list"])
def test_ten_thousand_levels_of_nesting_is_invalid_payload_not_recursion_error(redis_client, valid, container):
    with pytest.raises(InvalidPayload, match="not JSON-serialisable"):
        call({**valid, "payload": {"deep": nested(10_000, container)}})
    assert redis_client.llen("routine") == 0


@pytest.mark.parametrize("container", ["dict", "list"])
@pytest.mark.parametrize(("depth", "accepted"), [(63, True), (64, False), (500, False), (900, False)])
def test_nesting_has_a_fixed_limit_whatever_the_callers_stack(redis_client, valid, container, depth, accepted):
    # Without a bound of its own, 900 levels passed json.dumps here and then failed to decode in a worker.
    payload = {"a": nested(depth - 1, container)}
    if accepted:
        assert call({**valid, "payload": payload}) is Outcome.ACCEPTED
    else:
        with pytest.raises(InvalidPayload, match="nested more than 64 levels deep"):
            call({**valid, "payload": payload})


# "\x01" is written as a six-byte escape ("\x00" too, which notify() refuses whatever its size: test_notify.py).
@FEW
@given(n=st.integers(0, 4 * LIMIT), char=st.sampled_from(["x", "é", "€", "😀", "\x01", '"', "\\"]))
def test_payload_size_is_measured_as_utf8_json(redis_client, valid, n, char):
    payload = {"blob": char * n}
    size = len(json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode())
    if size > LIMIT:
        with pytest.raises(PayloadTooLarge):
            call({**valid, "payload": payload})
    else:
        assert call({**valid, "payload": payload}) is Outcome.ACCEPTED


# Fold keys


def split3(text, i, j):
    i, j = sorted((i % (len(text) + 1), j % (len(text) + 1)))
    return text[:i], text[i:j], text[j:]


USER_IDS = st.integers() | TEXT


# HTTP


@pytest.fixture
def send(client, db):
    token = IngestToken(name="fuzzer", kinds=sorted(DEMO_KINDS), reveal_details=True, rate_per_second=1e6, burst=10**6)
    raw = token.set_new_token()
    token.save()

    def post(body, content_type="application/json"):
        # generic() sends the bytes as they are; post() would re-encode them to the declared charset.
        data = body.encode() if isinstance(body, str) else body
        return client.generic("POST", URL, data, content_type=content_type, HTTP_AUTHORIZATION=f"Bearer {raw}")

    return post


def assert_clean_refusal(response, statuses=(400, 403, 413, 415)):
    text = response.content.decode()
    assert response.status_code in statuses, text
    assert response["Content-Type"] == "application/json"
    body = json.loads(text)
    assert set(body) == {"error", "detail"}
    assert all(isinstance(v, str) and v for v in body.values())
    assert "Traceback" not in text
    assert 'File "' not in text
    return body


def deep_body(valid, depth, container):
    """A body whose payload is nested ``depth`` levels deep, written out (json.dumps itself would recurse)."""
    opener, closer = ('{"a":', "}") if container == "dict" else ("[", "]")
    head = json.dumps({k: v for k, v in valid.items() if k != "payload"})[:-1]
    return f'{head}, "payload": {{"deep": {opener * depth}0{closer * depth}}}}}'


def dumps(value):
    # What a client may send: lone surrogates as \\u escapes (ensure_ascii) and, sometimes, NaN.
    return json.dumps(value, default=repr)


FINITE = st.floats(allow_nan=False, allow_infinity=False)
JSON_SCALARS = st.none() | st.booleans() | st.integers() | FINITE | TEXT
JSON_WRONG = st.one_of(
    st.none(),
    st.booleans(),
    FINITE,
    st.lists(JSON_SCALARS, max_size=3),
    st.dictionaries(st.text(max_size=3), JSON_SCALARS, max_size=3),
)
HTTP_BAD = {
    "user": (JSON_WRONG | st.integers(min_value=10**6), "unknown_user"),
    # A kind outside the token's scope is a 403, whether it exists or not (docs/ingest.md).
    "kind": (JSON_WRONG | st.integers() | TEXT.filter(lambda t: t not in DEMO_KINDS), "kind_not_allowed"),
    "entity_id": (
        JSON_WRONG.filter(lambda v: not isinstance(v, dict))
        | st.integers(min_value=10**200, max_value=10**4000)
        | st.text(CHAR, min_size=201, max_size=300),
        "invalid_entity_id",
    ),
    "payload": (JSON_WRONG.filter(lambda v: v is not None and not isinstance(v, dict)) | TEXT, "invalid_payload"),
}


@pytest.mark.parametrize(
    ("depth", "container", "status", "code"),
    [
        (10_000, "dict", 413, "body_too_large"),  # 50 KB of braces: refused before it is parsed
        (10_000, "list", 400, "invalid_json"),  # 20 KB: parsed, and too deep
        (900, "dict", 400, None),  # deep enough for the parser or for notify() to refuse
        (3, "list", 202, None),
    ],
)
def test_http_deep_payloads(redis_client, valid, send, depth, container, status, code):
    before = footprint(redis_client)
    response = send(deep_body(valid, depth, container))
    if status == 202:
        assert response.status_code == 202
        return
    body = assert_clean_refusal(response, (status,))
    assert body["error"] in ((code,) if code else ("invalid_json", "invalid_payload"))
    assert_nothing_grew(before, footprint(redis_client))


def test_http_utf8_encoded_surrogate_is_invalid_json(redis_client, valid, send):
    body = json.dumps({**valid, "entity_id": "X"}).encode().replace(b"X", b"\xed\xa0\x80")
    assert "not UTF-8" in assert_clean_refusal(send(body), (400,))["detail"]


def test_http_escaped_control_characters_count_against_the_body_limit(redis_client, valid, send):
    # 5,000 NULs are 5 KB of payload for notify(), but 30 KB on the wire as \u0000 escapes.
    assert_clean_refusal(send(json.dumps({**valid, "payload": {"blob": "\x00" * 7000}})), (413,))
    assert send(json.dumps({**valid, "payload": {"id": 'a|b:*\n"{}'}})).status_code == 202
