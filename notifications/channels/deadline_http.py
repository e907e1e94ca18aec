"""One HTTP request that never outlives its timeout: connect, send and every read are bounded by the time left, and
a watchdog shuts the socket at the deadline, so a provider that drips its answer cannot hold a worker past it.

http.client lets go of the connection's socket once the headers say ``Connection: close`` (the answer's body is then
read through the response alone), so the socket is kept here from the moment it connects: the bound on each read and
the watchdog act on it until the last byte of the body.
"""

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
    watched = _Watched(conn)
    response = None
    watchdog = threading.Timer(timeout_s, watched.abort)
    watchdog.daemon = True
    watchdog.start()
    try:
        try:
            conn.connect()
        except OSError as exc:
            raise Unreached(f"{type(exc).__name__}: {exc}") from exc
        watched.keep(conn.sock)
        watched.bound(deadline)
        conn.request(method, target, body=body, headers=headers)
        watched.bound(deadline)
        response = conn.getresponse()
        data = _read(watched, response, deadline)
        return Response(response.status, {k.lower(): v for k, v in response.getheaders()}, data)
    except (OSError, http.client.HTTPException) as exc:
        if isinstance(exc, Unreached):
            raise
        if watched.aborted or time.monotonic() >= deadline or isinstance(exc, TimeoutError):
            raise TimedOut(f"no complete answer within {timeout_s:.2f} s") from exc
        raise
    finally:
        watchdog.cancel()
        if response is not None:
            response.close()  # after "Connection: close" the response alone holds the socket's file
        conn.close()
        watched.close()


class _Watched:
    """The socket of one request, from its connection until the end of the answer's body."""

    def __init__(self, conn):
        self.conn = conn
        self.sock = None
        self.aborted = False

    def keep(self, sock):
        self.sock = sock

    def bound(self, deadline):
        """Let the next read or write wait at most the time left."""
        left = deadline - time.monotonic()
        if left <= 0 or self.aborted:
            raise TimedOut("the deadline passed")
        if self.sock is not None:
            self.sock.settimeout(left)

    def abort(self):
        # From the watchdog's thread: shutting the socket down wakes the blocked read at once (close alone may not).
        # Before connect() returns, the connection's own attribute holds the socket (a TLS handshake in progress).
        self.aborted = True
        for sock in {id(s): s for s in (self.sock, self.conn.sock) if s is not None}.values():
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self):
        if self.sock is not None:
            self.sock.close()


def _read(watched, response, deadline):
    chunks, size = [], 0
    while size < MAX_RESPONSE_BYTES:
        watched.bound(deadline)
        # read1: at most one read on the socket, so no call waits longer than the time left (read(n) would wait
        # for n bytes however slowly they drip).
        chunk = response.read1(min(CHUNK, MAX_RESPONSE_BYTES - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    if watched.aborted:
        # The watchdog's shutdown ends the body early, as an end of file would: the answer is incomplete.
        raise TimedOut("the deadline passed while the answer's body was read")
    return b"".join(chunks)
