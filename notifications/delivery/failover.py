"""Failover between a channel's providers, inside the send claim: one routine for one message or many.

The messages go to the channel's first provider whose breaker allows it, in one call (its bulk call, when the batch
sends in bulk; else one send per message). A message the provider failed transiently (a 5xx, a timeout, a refused
connection) moves to the next provider within the same attempt; a permanent failure does not (a bad number is bad
everywhere). Every call is reported to the provider's breaker (pipeline.gates.breaker), once per call, and the provider
that accepted each message is recorded (notifications.delivery.records). A channel without providers is one route: its
backend, with no breaker and no record.
"""

import dataclasses
import logging
import time

from redis.exceptions import RedisError

from notifications.channels import get_channel, get_provider
from notifications.channels.base import BaseChannel, PermanentSendError, TransientSendError, accepted
from notifications.delivery import records
from pipeline.gates import breaker
from pipeline.sending import expiry

logger = logging.getLogger("sluice.providers")

ERROR_CHARS = 160


@dataclasses.dataclass(frozen=True)
class Route:
    """One way out of a channel: a provider (``name``, with its breaker's settings) or the channel's own backend."""

    name: str | None
    backend: object
    breaker: object = None


class Taken(tuple):
    """A message a provider accepted: (provider, the provider's id for it), as a plain pair compares; ``tried`` says
    what the providers before it did (empty when the first one took it): the activity log's "failed over"."""

    def __new__(cls, provider, message_id, tried=()):
        taken = super().__new__(cls, (provider, message_id))
        taken.tried = tried
        return taken


def routes(channel):
    """The routes of ``channel`` (a ChannelConfig), in failover order."""
    if not channel.providers:
        return [Route(None, get_channel(channel.name))]
    return [Route(p.name, get_provider(channel.name, p.name), p.breaker) for p in channel.providers]


def sends_in_bulk(channel):
    """Whether every route of ``channel`` (a ChannelConfig) makes one call for many messages (send_many)."""
    return all(route.backend.supports_send_many for route in routes(channel))


def send(messages, channel, bulk=False):
    """Send ``messages`` of ``channel`` (a ChannelConfig); return one result per message, in order: (provider, the
    provider's id for it) when one accepted it (provider None for a channel without providers), else the exception
    it ends with: PermanentSendError as raised, expiry.Expired when it expired on the way, and TransientSendError
    naming what each provider did when none accepted it (a channel without providers: its backend's own error).
    ``bulk`` makes one send_many call per provider rather than one send per message."""
    results = [None] * len(messages)
    tried = [[] for _message in messages]
    errors = [None] * len(messages)
    waits = []
    remaining = list(range(len(messages)))
    every = routes(channel)
    for route in every:
        remaining = _still_sendable(messages, remaining, results, tried, route.name)
        if not remaining:
            break
        permit = _permit(channel, route, remaining, tried, waits)
        if permit is None:
            continue
        started = time.perf_counter()
        answers = _call(route.backend, [messages[i] for i in remaining], bulk)
        outcomes, failed = set(), []
        for index, answer in zip(remaining, answers, strict=True):
            if isinstance(answer, PermanentSendError):
                # The provider works: it refused this message. Another one would refuse it too.
                outcomes.add("rejected")
                results[index] = answer
            elif isinstance(answer, BaseException):
                tried[index].append(f"{route.name}: {type(answer).__name__}: {str(answer)[:ERROR_CHARS]}")
                errors[index] = answer
                failed.append(index)
            else:
                outcomes.add("accepted")
                answer, recipient = accepted(answer)
                if route.name is not None:
                    records.record_sent(messages[index], route.name, answer, recipient)
                results[index] = Taken(route.name, answer, tuple(tried[index]))
        if route.breaker is not None:
            # One call is one call for the breaker: "failed" only when it accepted none and refused none.
            outcome = "accepted" if "accepted" in outcomes else "rejected" if outcomes else "failed"
            breaker.record(channel.name, route.name, route.breaker, outcome, time.perf_counter() - started, permit)
        if failed and route.name is not None:
            logger.info(
                "send on %s: provider %s failed %d of %d, trying the next",
                channel.name,
                route.name,
                len(failed),
                len(remaining),
            )
        remaining = failed
    for index, result in enumerate(results):
        if result is None:
            results[index] = _none_accepted(every, tried[index], errors[index], waits)
    return results


def _permit(channel, route, remaining, tried, waits):
    """The breaker's permit for a call to ``route``, or None when its breaker refuses (or cannot be read)."""
    if route.breaker is None:
        return breaker.ALWAYS
    try:
        permit = breaker.allow(channel.name, route.name, route.breaker)
    except RedisError as exc:
        # Messages an earlier provider accepted keep their results: a raise here would send them again.
        for index in remaining:
            tried[index].append(f"{route.name}: breaker unknown ({type(exc).__name__})")
        return None
    if not permit.allowed:
        for index in remaining:
            tried[index].append(f"{route.name}: breaker {permit.state}")
        waits.append(permit.probes_in_s)
        return None
    return permit


def _call(backend, messages, bulk):
    """The backend's answer for each message: its id for the message, or the exception its send raised. Not in
    bulk, one send() per message: the base class's own send_many, whatever the backend's does."""
    if not bulk:
        return BaseChannel.send_many(backend, messages)
    try:
        answers = backend.send_many(messages)
        if len(answers) != len(messages):
            raise ValueError(f"send_many answered {len(answers)} times for {len(messages)} messages")
        return answers
    except Exception as exc:  # noqa: BLE001 - a bulk call that failed as a whole failed for every message in it
        return [exc] * len(messages)


def _none_accepted(every, tried, error, waits):
    """The result of a message no route accepted."""
    if every[0].name is None and error is not None:
        return error  # a channel's own backend: its error as it raised it
    failure = TransientSendError(f"no provider accepted the send: {'; '.join(tried)}")
    if len(waits) == len(every) and None not in waits:
        # No provider was even called: retrying before the first breaker lets probes through would only be refused
        # again, and use up the message's retries while its providers recover.
        failure.retry_after_s = max(1.0, min(waits))
    return failure


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
