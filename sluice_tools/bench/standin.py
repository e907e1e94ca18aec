"""A provider stand-in: an HTTP server on loopback that a test or a benchmark controls, recording what it accepted.

Modes: "healthy" (200 and a message id), "fail" (503), "timeout" (answers nothing for ``hang_s``, then 503: it
never accepts, like a provider that is down behind a load balancer), "random" (fails ``fail_ratio`` of the calls,
from a seeded generator), "permanent" (400: the recipient is bad) and "drip" (200 with a body that trickles out a
byte at a time, to show a timeout covers the whole answer).
"""

import json
import random
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODES = ("healthy", "fail", "timeout", "random", "permanent", "drip")


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # stop() must not wait for a request held by "timeout" or "drip".
    block_on_close = False


class ProviderStandIn:
    """One provider on 127.0.0.1. ``accepted`` holds (message id, when, ref) for every message it accepted: ``ref``
    is the JSON body's "ref" field, when a body template puts one there."""

    def __init__(self, name, mode="healthy", latency_s=0.0, fail_ratio=0.3, seed=0, hang_s=30.0):
        self.name = name
        self.latency_s = latency_s
        self.fail_ratio = fail_ratio
        self.hang_s = hang_s
        self.accepted = []
        self.calls = 0
        self._lock = threading.Lock()
        self._random = random.Random(seed)
        self.set_mode(mode)
        self._server = _Server(("127.0.0.1", 0), self._handler())
        self._thread = None

    @property
    def url(self):
        return f"http://127.0.0.1:{self._server.server_address[1]}/send"

    def set_mode(self, mode):
        """Switch what the provider does from the next call on."""
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}")
        self.mode = mode

    def start(self):
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True, name=f"standin-{self.name}")
        self._thread.start()
        return self

    def stop(self):
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def accepted_ids(self):
        with self._lock:
            return [message_id for message_id, _at, _ref in self.accepted]

    def _decide(self):
        with self._lock:
            self.calls += 1
            mode = self.mode
            if mode == "random":
                mode = "fail" if self._random.random() < self.fail_ratio else "healthy"
            return mode, self.calls

    def _accept(self, message_id, ref):
        with self._lock:
            self.accepted.append((message_id, time.time(), ref))

    def _handler(self):
        standin = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                message_id = self.headers.get("Idempotency-Key") or _field(body, "id")
                mode, number = standin._decide()
                if standin.latency_s:
                    time.sleep(standin.latency_s)
                if mode == "timeout":
                    time.sleep(standin.hang_s)
                    return self._answer(503, {"error": "timed out"})
                if mode == "drip":
                    return self._drip()
                if mode == "fail":
                    return self._answer(503, {"error": "unavailable"})
                if mode == "permanent":
                    return self._answer(400, {"error": "invalid recipient"})
                standin._accept(message_id, _field(body, "ref"))
                return self._answer(200, {"sid": f"{standin.name}-{number}"})

            def _answer(self, status, payload):
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:
                    pass  # the caller gave up first

            def _drip(self):
                try:
                    self.send_response(200)
                    self.send_header("Content-Length", "100000")
                    self.end_headers()
                    for _ in range(int(standin.hang_s / 0.1)):
                        self.wfile.write(b" ")
                        self.wfile.flush()
                        time.sleep(0.1)
                except OSError:
                    pass

            def log_message(self, *args):
                pass

        return Handler


def _field(body, name):
    try:
        value = json.loads(body).get(name)
    except (ValueError, AttributeError):
        return None
    return value if isinstance(value, str) else None
