"""What the face's JSON APIs for a signed-in user (/api/preferences/, /api/inbox/) answer alike: a 400 that names its
field, a body read within its bound, and the 401 and 503 answers."""

import json

from django.http import JsonResponse

NUL = "\x00"


class BadRequest(Exception):
    """A 4xx (400 unless told): the field it names, and why."""

    def __init__(self, field, detail, status=400, error="invalid"):
        super().__init__(detail)
        self.field, self.detail, self.status, self.error = field, detail, status, error


def respond(status, body, headers=None):
    """A JSON response with ``headers`` added."""
    response = JsonResponse(body, status=status)
    for name, value in (headers or {}).items():
        response[name] = value
    return response


def invalid(exc):
    """The answer of a BadRequest."""
    return respond(exc.status, {"error": exc.error, "field": exc.field, "detail": exc.detail})


def unauthorized():
    return respond(401, {"error": "unauthorized", "detail": "sign in first"})


def unavailable(exc, detail="retry"):
    """Redis could not be reached: a 503 the caller retries after a few seconds."""
    return respond(
        503,
        {"error": "unavailable", "detail": f"Redis is unavailable ({type(exc).__name__}); {detail}"},
        {"Retry-After": "5"},
    )


def query(request, name):
    """The query parameter ``name`` (None when absent); BadRequest when it holds a NUL, which no database column
    can be compared with (PostgreSQL refuses the query)."""
    value = request.GET.get(name)
    if value is not None and NUL in value:
        raise BadRequest(name, "must not contain a NUL character (U+0000)")
    return value


def read_object(request, limit):
    """The request's JSON body, an object of at most ``limit`` bytes without a NUL character; BadRequest otherwise.

    The declared Content-Length is checked first, and at most ``limit`` + 1 bytes are read from the stream, so an
    oversized body is refused without being read whole (as ingest does)."""
    if request.content_type != "application/json":
        raise BadRequest("", "send JSON, as Content-Type: application/json")
    too_large = f"the body is over the limit of {limit} bytes"
    try:
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        raise BadRequest("", "Content-Length is not a number") from None
    if declared > limit:
        raise BadRequest("", too_large, status=413, error="body_too_large")
    try:
        raw = request.read(limit + 1)
    except OSError:
        raise BadRequest("", "the body could not be read") from None
    if len(raw) > limit:
        raise BadRequest("", too_large, status=413, error="body_too_large")
    try:
        body = json.loads(raw)
    except RecursionError:
        raise BadRequest("", "the body is nested too deeply") from None
    except ValueError as exc:
        raise BadRequest("", f"the body is not valid JSON: {exc}") from None
    if not isinstance(body, dict):
        raise BadRequest("", "the body must be a JSON object")
    where = _nul_at(body)
    if where is not None:
        raise BadRequest(where, "must not contain a NUL character (U+0000)")
    return body


def _nul_at(body):
    """Where in ``body`` a key or a string holds a NUL ("preferences[0].kind"), or None. A loop, not a recursion:
    the body may be nested as deeply as the JSON parser allowed."""
    pending = [("", body)]
    while pending:
        where, value = pending.pop()
        if isinstance(value, str):
            if NUL in value:
                return where
        elif isinstance(value, dict):
            for key, item in value.items():
                name = key.replace(NUL, "\\u0000")  # named, not echoed: the answer shows where, not the NUL
                path = f"{where}.{name}" if where else name
                if NUL in key:
                    return path
                pending.append((path, item))
        elif isinstance(value, list):
            pending.extend((f"{where}[{index}]", item) for index, item in enumerate(value))
    return None
