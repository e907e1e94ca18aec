"""A real SMTP server for tests (aiosmtpd, on a free loopback port) that keeps every email it receives."""

import email
import email.policy
from contextlib import contextmanager

from sluice_tools.redis_server import free_port


@contextmanager
def smtp_capture(parse=True):
    """Yield (controller, received): the server's controller (hostname, port) and the list each email lands in,
    parsed as an email.message.EmailMessage, or aiosmtpd's envelope as it came when ``parse`` is False."""
    from aiosmtpd.controller import Controller

    received = []

    class Handler:
        async def handle_DATA(self, server, session, envelope):
            received.append(
                email.message_from_bytes(envelope.content, policy=email.policy.default) if parse else envelope
            )
            return "250 OK"

    controller = Controller(Handler(), hostname="127.0.0.1", port=free_port())
    controller.start()
    try:
        yield controller, received
    finally:
        controller.stop()
