"""Failover between a channel's providers, inside the send claim: the first healthy provider in order takes the send.

A transient failure (a 5xx, a timeout, a refused connection) moves to the next provider within the same attempt; a
permanent one does not (a bad number is bad everywhere). A provider whose breaker is open is skipped. Every call is
reported to its breaker (pipeline.breaker), and the provider that accepted is recorded (notifications.delivery).
"""

import logging
import time

from redis.exceptions import RedisError

from pipeline import breaker

from . import delivery, expiry
from .channels import get_provider
from .channels.base import PermanentSendError, TransientSendError, accepted

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
            provider_message_id, recipient = accepted(get_provider(channel.name, provider.name).send(message))
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
        delivery.record_sent(message, provider.name, provider_message_id, recipient)
        return provider.name, provider_message_id
    error = TransientSendError(f"no provider accepted the send: {'; '.join(tried)}")
    if len(waits) == len(channel.providers) and None not in waits:
        # No provider was even called: retrying before the first breaker lets probes through would only be refused
        # again, and use up the message's retries while its providers recover.
        error.retry_after_s = max(1.0, min(waits))
    raise error


def send_many(messages, channel):
    """Send several messages of ``channel`` (a ChannelConfig) with each provider's bulk call, in failover order;
    return one result per message: (provider, provider's id) when one accepted it, else the exception it ends with.

    The rules are send()'s, per message: a transient failure moves that message to the next provider, a permanent
    one is its result, and a message that expired or ran out of its send budget on the way stops there. One bulk
    call is one call for the provider's breaker: "failed" only when it accepted none and refused none.
    """
    results = [None] * len(messages)
    tried = [[] for _message in messages]
    waits = []
    remaining = list(range(len(messages)))
    for provider in channel.providers:
        remaining = _still_sendable(messages, remaining, results, tried, provider.name)
        if not remaining:
            break
        try:
            permit = breaker.allow(channel.name, provider.name, provider.breaker)
        except RedisError as exc:
            # Messages an earlier provider accepted keep their results: a raise here would send them again.
            for index in remaining:
                tried[index].append(f"{provider.name}: breaker unknown ({type(exc).__name__})")
            continue
        if not permit.allowed:
            for index in remaining:
                tried[index].append(f"{provider.name}: breaker {permit.state}")
            waits.append(permit.probes_in_s)
            continue
        started = time.perf_counter()
        try:
            answers = get_provider(channel.name, provider.name).send_many([messages[i] for i in remaining])
            if len(answers) != len(remaining):
                raise ValueError(f"send_many answered {len(answers)} times for {len(remaining)} messages")
        except Exception as exc:  # noqa: BLE001 - a bulk call that failed as a whole failed for every message in it
            answers = [exc] * len(remaining)
        outcomes, failed = set(), []
        for index, answer in zip(remaining, answers, strict=True):
            if isinstance(answer, PermanentSendError):
                outcomes.add("rejected")
                results[index] = answer
            elif isinstance(answer, BaseException):
                tried[index].append(f"{provider.name}: {type(answer).__name__}: {str(answer)[:ERROR_CHARS]}")
                failed.append(index)
            else:
                outcomes.add("accepted")
                answer, recipient = accepted(answer)
                delivery.record_sent(messages[index], provider.name, answer, recipient)
                results[index] = (provider.name, answer)
        outcome = "accepted" if "accepted" in outcomes else "rejected" if outcomes else "failed"
        breaker.record(channel.name, provider.name, provider.breaker, outcome, _since(started), permit)
        if failed:
            logger.info(
                "bulk send on %s: provider %s failed %d of %d, trying the next",
                channel.name,
                provider.name,
                len(failed),
                len(remaining),
            )
        remaining = failed
    for index in remaining:
        error = TransientSendError(f"no provider accepted the send: {'; '.join(tried[index])}")
        if len(waits) == len(channel.providers) and None not in waits:
            error.retry_after_s = max(1.0, min(waits))
        results[index] = error
    for index, result in enumerate(results):
        if result is None:
            results[index] = TransientSendError(f"no provider accepted the send: {'; '.join(tried[index])}")
    return results


def _still_sendable(messages, indexes, results, tried, provider):
    """The messages among ``indexes`` that may still go to a provider; the others get their result now."""
    kept = []
    for index in indexes:
        message = messages[index]
        if expiry.passed(message.expires_at):
            results[index] = expiry.Expired(f"expired before a provider accepted it ({'; '.join(tried[index])})")
        elif message.deadline is not None and time.monotonic() >= message.deadline:
            tried[index].append(f"{provider}: no time left in the send budget")
        else:
            kept.append(index)
    return kept


def _since(started):
    return time.perf_counter() - started
