"""A webhook channel: an HTTP POST of the message as JSON, optionally signed with HMAC-SHA256 over a timestamp.

Three rules keep a receiver, or something pretending to be one, from fooling or holding the sender:

- Redirects are not followed. urllib would turn a POST answered with a 302 into a GET, and count the GET's
  200 as delivered; a redirect is the receiver's misconfiguration, so it is a permanent failure.
- The signature covers a timestamp and the body, so a captured request cannot be replayed after the receiver's
  window (docs/security.md says how a receiver checks both).
- ``timeout_s`` bounds the whole send, not each socket read: a receiver that trickles its headers a byte at a
  time is cut off when the time is up.
"""

import hashlib
import hmac
import http.client
import json
import socket
import threading
import time
import urllib.error
import urllib.request

from .base import BaseChannel, PermanentSendError, TransientSendError

SIGNATURE_HEADER = "X-Sluice-Signature"
TIMESTAMP_HEADER = "X-Sluice-Timestamp"
# A receiver's answer is not read past its status and headers, but a body it sends at once is drained this far.
DRAIN_BYTES = 64 * 1024


def sign(secret, timestamp, body):
    """The signature of one request: "v1=" and the hex HMAC-SHA256 of "<timestamp>." followed by the body."""
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return f"v1={mac.hexdigest()}"


class WebhookChannel(BaseChannel):
    """Options: ``url`` (required), ``secret`` (signs each request), ``timeout_s`` (the whole send, default 5)."""

    def __init__(self, name, **options):
        super().__init__(name, **options)
        if not options.get("url"):
            raise ValueError(f"SLUICE_CHANNELS['{name}']['options']['url'] is required for a webhook")

    def send(self, message):
        body = json.dumps(
            {
                "id": message.id,
                "kind": message.kind,
                "class": message.klass,
                "user_id": message.user_id,
                "entity_id": message.entity_id,
                "subject": message.subject,
                "body": message.body,
                "count": message.count,
                "payload": message.payload,
            }
        ).encode()
        headers = {"Content-Type": "application/json", "Idempotency-Key": message.id}
        secret = self.options.get("secret")
        if secret:
            # Signed at each attempt: a retry carries a fresh timestamp, so the receiver's window never refuses it.
            timestamp = str(int(time.time()))
            headers[TIMESTAMP_HEADER] = timestamp
            headers[SIGNATURE_HEADER] = sign(secret, timestamp, body)
        request = urllib.request.Request(self.options["url"], data=body, headers=headers, method="POST")
        timeout = float(self.options.get("timeout_s", 5))
        deadline = Deadline(timeout)
        opener = urllib.request.build_opener(_NoRedirects(), _TimedHTTPHandler(deadline), _TimedHTTPSHandler(deadline))
        try:
            with deadline, opener.open(request, timeout=timeout) as response:
                response.read(DRAIN_BYTES)
                return
        except urllib.error.HTTPError as exc:
            if 300 <= exc.code < 400:
                raise PermanentSendError(f"webhook answered {exc.code}; redirects are not followed") from exc
            if exc.code == 429 or exc.code >= 500:
                raise TransientSendError(f"webhook answered {exc.code}") from exc
            raise PermanentSendError(f"webhook answered {exc.code}") from exc
        except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
            if deadline.expired:
                raise TransientSendError(f"webhook took longer than {timeout:g} s") from exc
            raise TransientSendError(f"webhook unreachable: {exc}") from exc


class Deadline:
    """Closes the connection of one send when its time is up, whatever it is waiting for at that moment."""

    def __init__(self, seconds):
        self.seconds = seconds
        self.expired = False
        self._connections = []
        self._lock = threading.Lock()
        self._timer = None

    def __enter__(self):
        self._timer = threading.Timer(self.seconds, self._expire)
        self._timer.daemon = True
        self._timer.start()
        return self

    def __exit__(self, *exc):
        self._timer.cancel()

    def watch(self, connection):
        with self._lock:
            if self.expired:
                raise TimeoutError("the send's time was up before it connected")
            self._connections.append(connection)

    def _expire(self):
        with self._lock:
            self.expired = True
            connections = list(self._connections)
        for connection in connections:
            sock = connection.sock
            if sock is not None:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass  # already closed


def _timed(base, deadline):
    class Connection(base):
        def connect(self):
            # Watched from the start, so that the deadline also cuts a TLS handshake the server drags out.
            deadline.watch(self)
            super().connect()
            if deadline.expired:
                raise TimeoutError("the send's time was up while it connected")

    return Connection


class _TimedHTTPHandler(urllib.request.HTTPHandler):
    def __init__(self, deadline):
        super().__init__()
        self.deadline = deadline

    def http_open(self, req):
        return self.do_open(_timed(http.client.HTTPConnection, self.deadline), req)


class _TimedHTTPSHandler(urllib.request.HTTPSHandler):
    def __init__(self, deadline):
        super().__init__()
        self.deadline = deadline

    def https_open(self, req):
        return self.do_open(_timed(http.client.HTTPSConnection, self.deadline), req, context=self._context)


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None  # urllib then raises HTTPError with the 3xx code
