"""A webhook channel: an HTTP POST of the message as JSON, optionally signed with HMAC-SHA256."""

import hashlib
import hmac
import json
import urllib.error
import urllib.request

from .base import BaseChannel, PermanentSendError, TransientSendError


class WebhookChannel(BaseChannel):
    """Options: ``url`` (required), ``secret`` (signs the body), ``timeout_s`` (default 5)."""

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
            headers["X-Sluice-Signature"] = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
        request = urllib.request.Request(self.options["url"], data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self.options.get("timeout_s", 5)):
                return
        except urllib.error.HTTPError as exc:
            if exc.code == 429 or exc.code >= 500:
                raise TransientSendError(f"webhook answered {exc.code}") from exc
            raise PermanentSendError(f"webhook answered {exc.code}") from exc
        except (urllib.error.URLError, OSError) as exc:
            raise TransientSendError(f"webhook unreachable: {exc}") from exc
