"""A webhook channel: an HTTP POST of the message as JSON, optionally signed with HMAC-SHA256 over a timestamp.

Three rules keep a receiver, or something pretending to be one, from fooling or holding the sender:

- Redirects are not followed. urllib would turn a POST answered with a 302 into a GET, and count the GET's
  200 as delivered; a redirect is the receiver's misconfiguration, so it is a permanent failure.
- The signature covers a timestamp and the body, so a captured request cannot be replayed after the receiver's
  window (docs/security.md says how a receiver checks both).
- ``timeout_s`` bounds the whole send, not each socket read, through the same deadline as the HTTP providers
  (deadline_http): a receiver that trickles its headers or its answer's body a byte at a time is cut off when the
  time is up, and the send is not counted as delivered.
"""

import hashlib
import hmac
import http.client
import json
import time

from . import deadline_http
from .base import BaseChannel, PermanentSendError, TransientSendError

SIGNATURE_HEADER = "X-Sluice-Signature"
TIMESTAMP_HEADER = "X-Sluice-Timestamp"


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
        timeout = message.time_left(float(self.options.get("timeout_s", 5)))
        if timeout <= 0:
            raise TransientSendError("no time left in the send budget")
        try:
            # http.client never follows a redirect: a 3xx is the answer, and refused below.
            response = deadline_http.request("POST", self.options["url"], body, headers, timeout)
        except deadline_http.Unreached as exc:
            raise TransientSendError(f"webhook unreachable: {exc}") from exc
        except deadline_http.TimedOut as exc:
            raise TransientSendError(f"webhook took longer than {timeout:g} s") from exc
        except (OSError, http.client.HTTPException) as exc:
            raise TransientSendError(f"webhook connection failed: {type(exc).__name__}: {exc}") from exc
        code = response.status
        if 200 <= code < 300:
            return
        if 300 <= code < 400:
            raise PermanentSendError(f"webhook answered {code}; redirects are not followed")
        if code == 429 or code >= 500:
            raise TransientSendError(f"webhook answered {code}")
        raise PermanentSendError(f"webhook answered {code}")
