"""One HTTP request that never outlives its timeout: connect, send and every read are bounded by the time left, and
a watchdog shuts the socket at the deadline, so a provider that drips its answer cannot hold a worker past it."""

import http.client
import socket
import ssl
import threading
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

MAX_RESPONSE_BYTES = 64 * 1024
CHUNK = 8192


class Unreached(OSError):
    """No byte of the request reached the provider (refused, unresolvable, no connection in time): another
    provider may safely be tried."""


class TimedOut(TimeoutError):
    """The time ran out after the request was sent: the provider may still have accepted it."""


@dataclass(frozen=True)
class Response:
    """A provider's answer: its status, its headers (lowercase names), and at most MAX_RESPONSE_BYTES of body."""

    status: int
    headers: dict
    body: bytes


def request(method, url, body, headers, timeout_s):
    """Send one request and read its answer within ``timeout_s`` seconds in all; raise Unreached, TimedOut, or
    another OSError / http.client.HTTPException for a connection that broke."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"not an http(s) URL: {url!r}")
    deadline = time.monotonic() + timeout_s
    if parts.scheme == "https":
        conn = http.client.HTTPSConnection(
            parts.hostname, parts.port, timeout=timeout_s, context=ssl.create_default_context()
        )
    else:
        conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout_s)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    watchdog = threading.Timer(timeout_s, _abort, args=(conn,))
    watchdog.daemon = True
    watchdog.start()
    try:
        try:
            conn.connect()
        except OSError as exc:
            raise Unreached(f"{type(exc).__name__}: {exc}") from exc
        _bound(conn, deadline)
        conn.request(method, target, body=body, headers=headers)
        _bound(conn, deadline)
        response = conn.getresponse()
        data = _read(conn, response, deadline)
        return Response(response.status, {k.lower(): v for k, v in response.getheaders()}, data)
    except (OSError, http.client.HTTPException) as exc:
        if isinstance(exc, Unreached):
            raise
        if time.monotonic() >= deadline or isinstance(exc, TimeoutError):
            raise TimedOut(f"no complete answer within {timeout_s:.2f} s") from exc
        raise
    finally:
        watchdog.cancel()
        conn.close()


def _bound(conn, deadline):
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimedOut("the deadline passed")
    if conn.sock is not None:
        conn.sock.settimeout(left)


def _read(conn, response, deadline):
    chunks, size = [], 0
    while size < MAX_RESPONSE_BYTES:
        _bound(conn, deadline)
        chunk = response.read(min(CHUNK, MAX_RESPONSE_BYTES - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def _abort(conn):
    # From the watchdog's thread: shutting the socket down wakes the blocked read at once (close alone may not).
    sock = conn.sock
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
