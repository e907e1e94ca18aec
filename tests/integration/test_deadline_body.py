"""The send deadline covers the answer's body: a provider or a webhook receiver that answers its headers at once, then
drips its body for 40 s, holds the send no longer than its timeout, with keep-alive and with ``Connection: close``."""

import socket
import threading
import time

import pytest

from notifications.channels.base import Message, TransientSendError
from notifications.channels.http_provider import HttpProviderChannel
from notifications.channels.webhook import WebhookChannel

TIMEOUT_S = 2.0
DRIP_S = 40.0  # how long the server would drip its body, one byte every DRIP_EVERY_S
DRIP_EVERY_S = 0.1


class DrippingServer:
    """Answers every request "200 OK" with its headers at once, then a body of one byte per DRIP_EVERY_S."""

    def __init__(self, close):
        self.close = close
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.stopped = threading.Event()
        self.requests = 0

    @property
    def url(self):
        return f"http://127.0.0.1:{self.listener.getsockname()[1]}/send"

    def __enter__(self):
        threading.Thread(target=self._serve, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self.stopped.set()
        self.listener.close()

    def _serve(self):
        while not self.stopped.is_set():
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn):
        with conn:
            self._read_request(conn)
            self.requests += 1
            length = int(DRIP_S / DRIP_EVERY_S)
            connection = "close" if self.close else "keep-alive"
            head = f"HTTP/1.1 200 OK\r\nContent-Length: {length}\r\nConnection: {connection}\r\n\r\n"
            try:
                conn.sendall(head.encode())
                for _ in range(length):
                    if self.stopped.wait(DRIP_EVERY_S):
                        return
                    conn.sendall(b"x")
            except OSError:
                return  # the client gave up: what the test expects

    def _read_request(self, conn):
        data = b""
        while b"\r\n\r\n" not in data:
            data += conn.recv(65536)
        head, _, body = data.partition(b"\r\n\r\n")
        length = next(
            (int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")), 0
        )
        while len(body) < length:
            body += conn.recv(65536)


def message():
    return Message(
        id="n1",
        channel="x",
        kind="k",
        klass="critical",
        user_id=1,
        entity_id="e",
        subject="s",
        body="b",
        payload={"to": "+15550100"},
    )


def http_provider(url):
    return HttpProviderChannel("sms", url=url, recipient="payload.to", body={"to": "1"}, timeout_s=TIMEOUT_S)


def webhook(url):
    return WebhookChannel("hook", url=url, timeout_s=TIMEOUT_S)


@pytest.mark.timeout(30)
@pytest.mark.parametrize("close", [False, True], ids=["keep-alive", "connection-close"])
@pytest.mark.parametrize("build", [http_provider, webhook], ids=["http-provider", "webhook"])
def test_a_dripped_body_ends_the_send_at_its_timeout(build, close):
    with DrippingServer(close) as server:
        channel = build(server.url)
        started = time.monotonic()
        with pytest.raises(TransientSendError) as failed:
            channel.send(message())
        took = time.monotonic() - started
    assert server.requests == 1
    print(f"{build.__name__}, {'close' if close else 'keep-alive'}: ended after {took:.2f} s: {failed.value}")
    # Well under the 40 s drip; the margin is for a loaded machine, not a tight bound on the deadline.
    assert took < TIMEOUT_S + 0.5
