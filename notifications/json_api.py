"""What the face's JSON APIs for a signed-in user (/api/preferences/, /api/inbox/) answer alike: a 400 that names its
field, a body read within its bound, and the 401 and 503 answers."""

import json

from django.http import JsonResponse


class BadRequest(Exception):
    """A 400: the field it names, and why."""

    def __init__(self, field, detail):
        super().__init__(detail)
        self.field, self.detail = field, detail


def respond(status, body, headers=None):
    """A JSON response with ``headers`` added."""
    response = JsonResponse(body, status=status)
    for name, value in (headers or {}).items():
        response[name] = value
    return response


def invalid(exc):
    """The 400 of a BadRequest."""
    return respond(400, {"error": "invalid", "field": exc.field, "detail": exc.detail})


def unauthorized():
    return respond(401, {"error": "unauthorized", "detail": "sign in first"})


def unavailable(exc, detail="retry"):
    """Redis could not be reached: a 503 the caller retries after a few seconds."""
    return respond(
        503,
        {"error": "unavailable", "detail": f"Redis is unavailable ({type(exc).__name__}); {detail}"},
        {"Retry-After": "5"},
    )


def read_object(request, limit):
    """The request's JSON body, an object of at most ``limit`` bytes; BadRequest otherwise."""
    if request.content_type != "application/json":
        raise BadRequest("", "send JSON, as Content-Type: application/json")
    if len(request.body) > limit:
        raise BadRequest("", f"the body is over {limit} bytes")
    try:
        body = json.loads(request.body)
    except ValueError as exc:
        raise BadRequest("", f"the body is not valid JSON: {exc}") from None
    if not isinstance(body, dict):
        raise BadRequest("", "the body must be a JSON object")
    return body
