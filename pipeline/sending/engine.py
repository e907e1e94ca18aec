"""The one send engine: every send task hands it a batch of messages, and a single send is a batch of one.

Message by message and in order, each channel's send passes the same rules: expiry (never sent late), the send claim
(once per notification and channel) and the channel's gate (per message, never per batch), both in one round trip
when they share a Redis (pipeline.sending.claims.gated_claim), the send's deadline, the providers (one call for the
claimed sends of a channel that sends in bulk), and its end (marked sent and counted). Each message then ends on its
own (pipeline.sending.endings): done, retried, back at the end of its queue, dead-lettered, or requeued. When the gate
does not grant a send at once, the sends waiting go out first; when a critical send is what holds the channel, a
batch gives back every message it has not started.

What the engine does not know is handed in as a ``delivery`` (notifications.delivery.tasks.DELIVERY):

- ``delivery.messages(attempt)``: the event's kind and its rendered message for each channel still to send (raises
  endings.Ended when the message ends there, a kind no longer registered);
- ``delivery.bulk(channel)``: whether the channel (a ChannelConfig) sends many messages in one call;
- ``delivery.send(messages, channel, bulk)``: one result per message, in order: what the provider answered, or the
  exception the message's send ends with (results.PermanentSendError, expiry.Expired, or any other: retried).
"""

import dataclasses
import logging
import time
from contextlib import ExitStack

from pipeline import activity_fields, metrics
from pipeline.broker import batch_fetch
from pipeline.conf import sluice_settings
from pipeline.gates import gate
from pipeline.sending import endings, expiry
from pipeline.sending.claims import ClaimedElsewhere, claim_ttl, describe, gated_claim, record_end

from .endings import Ended
from .results import PermanentSendError

logger = logging.getLogger("sluice.send")


@dataclasses.dataclass(eq=False)
class Item:
    """One message of a batch and what happened to it so far."""

    attempt: endings.Attempt
    # (source list, raw message) for a message the batch took from its queue; None for the task's own message.
    fetched: tuple | None = None
    kind_obj: object = None
    messages: list = dataclasses.field(default_factory=list)
    expired: list = dataclasses.field(default_factory=list)
    failed: list = dataclasses.field(default_factory=list)
    started: bool = False
    given_back: bool = False
    # Why the message cannot finish here: another worker holds a claim, or its gate had no room in time.
    held_back: ClaimedElsewhere | None = None
    gate_timeout: bool = False
    # Where its messages stopped when held back or timed out at the gate: it goes back with the channels from there.
    stopped_at: int = 0
    error: Exception | None = None
    # Whether its last channel's end counted it as processed (in that end's round trip).
    counted: bool = False
    # How it ended, once it has.
    ending: endings.Ending | None = None


class Batch:
    """The sends of one batch, grouped by channel until they go out together.

    ``delivery`` renders and sends (the module's docstring); ``take`` returns more Items from the queue (after the
    first message passed its gate) or is None for a batch of one; ``alive`` renews the batch's hold on what it took.
    """

    def __init__(self, delivery, items, take=None, alive=None):
        self.delivery = delivery
        self.items = items
        self.take = take
        self.alive = alive or (lambda: None)
        self.pending = {}
        self.slots = ExitStack()
        # Set once a critical send was seen on a channel of this batch: the batch takes no more messages.
        self.critical_seen = False
        self.bulk_channels = {}

    def run(self):
        """Send every message and end each one; return the first message's Ending."""
        self.prepare(self.items)
        try:
            first = self.items[0]
            if ready(first):
                self.send_item(0, first)
            # More messages only once the task's own passed its gate: while critical holds a channel, a batch
            # would take messages only to give them back.
            if self.take is not None and first.held_back is None and not first.gate_timeout and not self.critical_seen:
                taken = self.take()
                self.prepare(taken)
                self.items.extend(taken)
            for index in range(1, len(self.items)):
                item = self.items[index]
                if ready(item):
                    self.alive()
                    self.send_item(index, item)
            self.flush()
        finally:
            self.slots.close()
        for item in self.items:
            if not item.given_back and item.ending is None:
                item.ending = conclude(item)
        return self.items[0].ending

    def prepare(self, items):
        """Render each item's event for every channel still to send (or end it: a kind no longer registered)."""
        for item in items:
            try:
                item.kind_obj, item.messages = self.delivery.messages(item.attempt)
            except Ended as ended:
                item.ending = ended.ending
            except Exception as exc:  # noqa: BLE001 - retried, like any unexpected failure
                item.error = exc

    def summary(self):
        """How the batch's messages ended, in one line: "12 messages: 10 done, 1 retried, 0 dead-lettered, ..."."""
        ends = {"done": 0, "retried": 0, "dead-lettered": 0, "requeued": 0, "given back": 0}
        names = {endings.DONE: "done", endings.RETRIED: "retried", endings.DEAD_LETTERED: "dead-lettered"}
        for item in self.items:
            if item.given_back:
                ends["given back"] += 1
            else:
                ends[names.get(item.ending.result, "requeued") if item.ending else "requeued"] += 1
        count = len(self.items)
        return f"{count} message{'' if count == 1 else 's'}: " + ", ".join(f"{n} {end}" for end, n in ends.items())

    def send_item(self, index, item):
        for position, message in enumerate(item.messages):
            item.stopped_at = position
            if expiry.passed(message.expires_at):
                # Never sent late: a sign-in code that arrives after it expired is worse than none.
                item.expired.append(message.channel)
                continue
            try:
                claimed = self.claim(index, message)
            except gate.GateTimeout:
                item.gate_timeout = True
                self.give_back_after(index)
                return
            except ClaimedElsewhere as exc:
                item.held_back = exc
                return
            if claimed:
                item.started = True
                message = dataclasses.replace(message, deadline=send_deadline(message))
                group = self.pending.setdefault(message.channel, [])
                group.append((item, message))
                if not self.bulk(message.channel) or len(group) >= _group_limit(message.channel):
                    # No bulk call to wait for, or as many sends as the channel's rate allows at one instant: sent
                    # now, so a send never starts long after the gate granted it.
                    self.flush()

    def claim(self, index, message):
        """Pass the channel's gate for one message and claim its send (claims.gated_claim: one round trip on one
        Redis), at once or after the sends waiting went out; claim's answer. Critical on the channel sends the
        messages after this one back to the queue. Raises gate.GateTimeout when the gate had no room in time, and
        ClaimedElsewhere."""
        published_at = self.items[index].attempt.published_at
        if self.pending or self.can_give_back(index):
            try:
                return self.slots.enter_context(gated_claim(message, published_at, max_wait_s=0))
            except gate.GateTimeout:
                pass
            # Whatever holds the gate, the sends already claimed do not wait with this one.
            self.flush()
            if self.can_give_back(index) and batch_fetch.critical_active(message.channel, message.payload):
                self.critical_seen = True
                self.give_back_after(index)
        return self.slots.enter_context(gated_claim(message, published_at, max_wait_s=gate_wait(message)))

    def can_give_back(self, index):
        """Whether the batch may still give back messages after ``index``: it has taken some, or may take."""
        return self.take is not None and (index == 0 or index < len(self.items) - 1)

    def give_back_after(self, index):
        """Mark every message after ``index`` that has not started to go back to the queue."""
        for item in self.items[index + 1 :]:
            if item.fetched is not None and not item.started and item.ending is None:
                item.given_back = True

    def flush(self):
        """Send every claimed send that waits, one call per channel; record each one's end."""
        pending, self.pending = self.pending, {}
        try:
            for channel, group in pending.items():
                self.send_group(channel, group)
        finally:
            self.slots.close()
            self.slots = ExitStack()

    def bulk(self, channel):
        """Does the channel's backend (every one of its providers') make one call for many messages?"""
        if channel not in self.bulk_channels:
            self.bulk_channels[channel] = self.delivery.bulk(sluice_settings().channels[channel])
        return self.bulk_channels[channel]

    def send_group(self, channel, group):
        """One call for the group's messages; then each message's own result and its end, recorded."""
        messages = [message for _item, message in group]
        started = time.perf_counter()
        results = self.delivery.send(messages, sluice_settings().channels[channel], self.bulk(channel))
        seconds = time.perf_counter() - started
        for (item, message), result in zip(group, results, strict=True):
            status = "sent"
            if isinstance(result, expiry.Expired):
                status = "expired"
                item.expired.append(channel)
            elif isinstance(result, PermanentSendError):
                status = "rejected"
                # Kept at once: whatever the rest of the batch then meets, this channel's failure is in the dead
                # letters, not only in memory.
                try:
                    endings.keep(item.attempt, result.reason, result, [channel])
                except Ended as ended:
                    item.ending = item.ending or ended.ending
            elif isinstance(result, BaseException):
                status = "failed"
                logger.warning(
                    "send %s on %s failed, %s: %s",
                    message.id,
                    channel,
                    endings.next_step(item.attempt),
                    describe(result),
                )
                item.failed.append((channel, result))
            # The last channel's end counts the message as processed in the same round trip.
            last = message.channel == item.messages[-1].channel
            also = metrics.processed_field(item.kind_obj.klass) if last else ""
            # A scheduled send's lateness, once a message, with its last channel's end.
            send_at = item.attempt.kwargs.get("send_at") if last and status == "sent" else None
            lateness = time.time() - send_at if isinstance(send_at, (int, float)) else None
            logged = _activity(item, message, status, result)
            if record_end(message, status, seconds, also_count=also, lateness=lateness, activity=logged) and also:
                item.counted = True


def _activity(item, message, status, result):
    """The activity log's entry for one channel's end of a send, written with it: sent (its provider and the provider's
    id for it) or retried (the error); None when the dead letters write their own (a refusal, an expiry, the last
    attempt's failure: endings.keep)."""
    if status == "sent":
        provider, provider_id = result if isinstance(result, tuple) else (None, None)
        outcome, reason, detail = activity_fields.SENT, "", provider_id or ""
        failed = [step.split(":", 1)[0] for step in getattr(result, "tried", ())]
        if failed:
            # Failed over: the providers that failed it first, by name (their errors are in the worker's log).
            reason = activity_fields.FAILOVER_PREFIX + ",".join(failed)
    elif status == "failed" and not endings.last_attempt(item.attempt):
        provider, outcome, reason = None, activity_fields.RETRIED, type(result).__name__
        detail = str(result)[: activity_fields.DETAIL_MAX]
    else:
        return None
    return activity_fields.Entry(
        str(message.user_id),
        message.kind,
        message.entity_id,
        message.id,
        message.klass,
        outcome,
        reason,
        str(detail),
        channel=message.channel,
        provider=provider or "",
    )


def ready(item):
    return not item.given_back and item.ending is None and item.error is None


def conclude(item):
    """End one message: keep its expired channels, retry its failed ones, put it back when its gate had no room."""
    attempt = item.attempt
    try:
        if item.error is not None:
            return endings.unexpected(attempt, item.error)
        left = still_to_send(item.messages, item.stopped_at, item.failed, item.expired)
        if item.held_back is not None:
            # Try again once the claim has expired: a sender that died holding it frees it then.
            endings.retry(attempt, item.held_back, item.held_back.expires_in_s, left)
        if item.gate_timeout:
            endings.back_of_queue(attempt, left, gate.GateTimeout.__name__)
        if not item.counted:
            metrics.count(metrics.processed_field(item.kind_obj.klass), klass=item.kind_obj.klass)
        if item.expired:
            why = f"not sent by its expiry ({item.kind_obj.expires_after_s} s after the event)"
            endings.keep(attempt, "expired", why, item.expired)
        if item.failed:
            # A channel whose every provider's breaker is open says when it may send again; the retry waits for it.
            countdown = max([endings.backoff(attempt)] + [getattr(e, "retry_after_s", 0) for _c, e in item.failed])
            endings.retry(attempt, item.failed[0][1], countdown, [channel for channel, _exc in item.failed])
    except Ended as ended:
        return ended.ending
    except Exception as exc:  # noqa: BLE001 - anything unexpected is retried
        return endings.unexpected(attempt, exc)
    return endings.Ending(endings.DONE)


def still_to_send(messages, index, failed, expired):
    """The channels a message goes back with when its attempt stops at ``messages[index]``: that one and those
    after it, and the ones that failed or expired before it. Not those already sent or dead-lettered: a "sent"
    mark outlives any redelivery (pipeline.broker.marks), but a message that goes round its queue again and again (a
    rate-limited channel's gate) could outlive the marks of the channels it sent first."""
    return [channel for channel, _exc in failed] + list(expired) + [m.channel for m in messages[index:]]


def send_deadline(message):
    """When this attempt's send must be over (time.monotonic()): the class's send budget, within the claim's
    lifetime, or the message's expiry when that comes first."""
    budget = min(sluice_settings().queues[message.klass].send_budget_s, claim_ttl())
    deadline = time.monotonic() + budget
    if message.expires_at is not None:
        deadline = min(deadline, time.monotonic() + (message.expires_at - time.time()))
    return deadline


def gate_wait(message):
    """How long the send may wait for its channel's gate: the gate's own limit, or less when it expires sooner."""
    channel_gate = sluice_settings().channels[message.channel].gate
    if message.expires_at is None or channel_gate is None:
        return None
    limit = gate.CRITICAL_MAX_WAIT_S if message.klass == "critical" else channel_gate.max_wait_ms / 1000
    return max(0.0, min(limit, message.expires_at - time.time()))


def _group_limit(channel):
    """The most claimed sends of ``channel`` one bulk call carries: its gate's burst when it has a rate limit (so a
    call never sends more at one instant than the token bucket allows), else no limit."""
    gate_conf = sluice_settings().channels[channel].gate
    if gate_conf is None or not sluice_settings().gate_enabled:
        return float("inf")
    bursts = []
    if gate_conf.rate_per_s:
        bursts.append(gate_conf.burst)
    if gate_conf.partition_by and (gate_conf.partition_rate_per_s or gate_conf.rate_per_s):
        bursts.append(gate_conf.partition_burst or gate_conf.burst)
    return max(1, min(bursts)) if bursts else float("inf")
