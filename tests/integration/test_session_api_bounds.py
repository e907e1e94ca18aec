"""The session JSON APIs (/api/preferences/, /api/inbox/) answer hostile input with a 4xx naming it, never a 500: a
deeply nested body, a NUL character in a query parameter or in the body, a body larger than declared or declared
larger than the limit (refused before it is read); and they need the CSRF token even on a host without
CsrfViewMiddleware."""

import io
import json

import pytest
from django.test import Client

from notifications.inbox.views import BODY_LIMIT as INBOX_LIMIT
from notifications.preferences.views import BODY_LIMIT as PREFERENCES_LIMIT
from tests import inbox_helpers

inbox_settings = inbox_helpers.inbox_settings  # the fixture, found by its name
pytestmark = pytest.mark.django_db(transaction=True)

# (method, path, a valid body, the body limit): every view of the two APIs that reads a body.
WRITES = [
    ("put", "/api/preferences/", {"preferences": []}, PREFERENCES_LIMIT),
    ("post", "/api/inbox/read/", {"ids": [1]}, INBOX_LIMIT),
    ("post", "/api/inbox/archive/", {"ids": [1]}, INBOX_LIMIT),
]
IDS = [f"{method} {path}" for method, path, *_ in WRITES]


@pytest.fixture
def signed_in(inbox_settings, user):
    client = Client()
    client.force_login(user)
    return client


def send(client, method, path, raw, **extra):
    return getattr(client, method)(path, raw, content_type="application/json", **extra)


@pytest.mark.parametrize(("method", "path", "body", "limit"), WRITES, ids=IDS)
def test_a_body_nested_8000_deep_is_a_400(signed_in, method, path, body, limit):
    deep = "[" * 8000 + "]" * 8000
    assert len(deep) <= limit
    response = send(signed_in, method, path, deep)
    assert response.status_code == 400, response.content
    assert response.json()["detail"] == "the body is nested too deeply"


@pytest.mark.parametrize(("method", "path", "body", "limit"), WRITES, ids=IDS)
def test_a_nul_character_in_the_body_is_a_400_naming_where(signed_in, method, path, body, limit):
    hostile = {**body, "x\u0000": 1} if path.startswith("/api/inbox/") else {"timezone": "UTC\u0000"}
    response = send(signed_in, method, path, json.dumps(hostile))
    assert response.status_code == 400, response.content
    assert "NUL" in response.json()["detail"]
    assert response.json()["field"] == ("x\\u0000" if path.startswith("/api/inbox/") else "timezone")


def test_a_nul_character_in_a_preference_row_is_a_400_naming_the_row(signed_in):
    rows = [{"kind": "task.assigned", "channel": "email\u0000", "mode": "off"}]
    response = send(signed_in, "put", "/api/preferences/", json.dumps({"preferences": rows}))
    assert response.status_code == 400, response.content
    assert response.json()["field"] == "preferences[0].channel"


def test_a_nul_character_in_a_query_parameter_is_a_400_naming_it(signed_in):
    response = signed_in.get("/api/inbox/?kind=a%00b")
    assert response.status_code == 400, response.content
    assert response.json()["field"] == "kind"
    assert signed_in.get("/api/inbox/?kind=doc.changed").status_code == 200


class CountingStream(io.BytesIO):
    """A request body that counts what the view read of it."""

    def read(self, size=-1):
        chunk = super().read(size)
        self.taken = getattr(self, "taken", 0) + len(chunk)
        return chunk


@pytest.mark.parametrize(("method", "path", "body", "limit"), WRITES, ids=IDS)
def test_a_body_declared_over_the_limit_is_a_413_before_it_is_read(signed_in, method, path, body, limit):
    stream = CountingStream(b" " * (limit * 64))  # 1 MiB or 4 MiB of a body, declared as such
    response = signed_in.generic(
        method.upper(),
        path,
        b"{}",
        content_type="application/json",
        CONTENT_LENGTH=str(limit * 64),
        **{"wsgi.input": stream},
    )
    assert response.status_code == 413, response.content
    assert response.json()["error"] == "body_too_large"
    assert getattr(stream, "taken", 0) == 0


@pytest.mark.parametrize(("method", "path", "body", "limit"), WRITES, ids=IDS)
def test_a_body_over_the_limit_is_a_413_read_no_further_than_the_limit(signed_in, method, path, body, limit):
    raw = json.dumps({**body, "pad": "x" * limit}).encode()
    stream = CountingStream(raw)
    response = signed_in.generic(
        method.upper(),
        path,
        b"{}",
        content_type="application/json",
        CONTENT_LENGTH=str(limit),  # a client that declares less than it sends
        **{"wsgi.input": stream},
    )
    assert response.status_code in (400, 413), response.content
    assert stream.taken <= limit + 1
    honest = send(signed_in, method, path, raw)
    assert honest.status_code == 413, honest.content


@pytest.mark.parametrize(("method", "path", "body", "limit"), WRITES, ids=IDS)
def test_a_host_without_csrf_middleware_still_needs_the_token(
    inbox_settings, user, settings, method, path, body, limit
):
    settings.MIDDLEWARE = [name for name in settings.MIDDLEWARE if name != "django.middleware.csrf.CsrfViewMiddleware"]
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(user)
    refused = send(strict, method, path, json.dumps(body))
    assert refused.status_code == 403, refused.content
    secret = "a" * 32  # the CSRF cookie's secret, and the same in the header: what a page's script sends
    strict.cookies["csrftoken"] = secret
    allowed = send(strict, method, path, json.dumps(body), HTTP_X_CSRFTOKEN=secret)
    assert allowed.status_code == 200, allowed.content
