"""Failover between a channel's providers, inside the send claim: the first healthy provider in order takes the send.

A transient failure (a 5xx, a timeout, a refused connection) moves to the next provider within the same attempt; a
permanent one does not (a bad number is bad everywhere). A provider whose breaker is open is skipped. Every call is
reported to its breaker (pipeline.breaker), and the provider that accepted is recorded (notifications.delivery).
"""

import logging
import time

from pipeline import breaker

from . import delivery, expiry
from .channels import get_provider
from .channels.base import PermanentSendError, TransientSendError

logger = logging.getLogger("sluice.providers")

ERROR_CHARS = 160


def send(message, channel):
    """Send ``message`` through the first provider of ``channel`` (a ChannelConfig) that accepts it; return the
    provider's name and its id for the message.

    Raises PermanentSendError as the provider raised it (no failover), expiry.Expired when the message expires on
    the way, and TransientSendError naming what each provider did when none accepted it.
    """
    tried, waits = [], []
    for provider in channel.providers:
        if expiry.passed(message.expires_at):
            raise expiry.Expired(f"expired before a provider accepted it ({'; '.join(tried) or 'none tried'})")
        if message.deadline is not None and time.monotonic() >= message.deadline:
            tried.append(f"{provider.name}: no time left in the send budget")
            break
        permit = breaker.allow(channel.name, provider.name, provider.breaker)
        if not permit.allowed:
            tried.append(f"{provider.name}: breaker {permit.state}")
            waits.append(permit.probes_in_s)
            continue
        started = time.perf_counter()
        try:
            provider_message_id = get_provider(channel.name, provider.name).send(message)
        except PermanentSendError:
            # The provider works: it refused this message. Another one would refuse it too.
            breaker.record(channel.name, provider.name, provider.breaker, "rejected", _since(started), permit)
            raise
        except Exception as exc:  # noqa: BLE001 - any other failure is the provider's: count it, try the next
            breaker.record(channel.name, provider.name, provider.breaker, "failed", _since(started), permit)
            tried.append(f"{provider.name}: {type(exc).__name__}: {str(exc)[:ERROR_CHARS]}")
            logger.info("send %s on %s: provider %s failed, trying the next", message.id, channel.name, provider.name)
            continue
        breaker.record(channel.name, provider.name, provider.breaker, "accepted", _since(started), permit)
        delivery.record_sent(message, provider.name, provider_message_id)
        return provider.name, provider_message_id
    error = TransientSendError(f"no provider accepted the send: {'; '.join(tried)}")
    if len(waits) == len(channel.providers) and None not in waits:
        # No provider was even called: retrying before the first breaker lets probes through would only be refused
        # again, and use up the message's retries while its providers recover.
        error.retry_after_s = max(1.0, min(waits))
    raise error


def _since(started):
    return time.perf_counter() - started
