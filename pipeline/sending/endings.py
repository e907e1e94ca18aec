"""How a send task's message ends when it is not simply done: retried, put back at the end of its queue, kept in the
dead letters, or requeued as it is. Each ending is data (an Ending) that the task turns into Celery's answer.

No path out of a send acks a message it did not handle: when the retry cannot be published or the dead letter
cannot be written, the ending is ``REQUEUED`` and the original goes back to its queue.
"""

import dataclasses
import logging
import time

from pipeline import activity_fields
from pipeline.broker import deadletters
from pipeline.conf import sluice_settings
from pipeline.connections import class_redis
from pipeline.sending import expiry
from pipeline.sending.claims import describe
from pipeline.sending.republish import republish

logger = logging.getLogger("sluice.send")

MAX_RETRIES = 5
MAX_BACKOFF_S = 60

DONE = "done"
RETRIED = "retried"
DEAD_LETTERED = "dead_lettered"
REQUEUED = "requeued"


@dataclasses.dataclass(frozen=True)
class Attempt:
    """One attempt at a send task's message, whether it came as the task's own message or a batch took it."""

    task_name: str
    task_id: str
    kwargs: dict
    retries: int = 0
    # When the message was first published (seconds since the epoch); its retries keep it.
    published_at: float | None = None

    @property
    def klass(self):
        """The class of the send task (sluice.send.<class>)."""
        return self.task_name.rsplit(".", 1)[-1]

    def expires_at(self, kind_obj):
        """When this message expires (seconds since the epoch), or None."""
        return expiry.expires_at(kind_obj, self.kwargs, self.published_at)


@dataclasses.dataclass(frozen=True)
class Ending:
    """How a message ended: DONE (handled), RETRIED (published again, due in ``countdown`` seconds; ``error`` names
    the exception's type), DEAD_LETTERED (kept with its reason), or REQUEUED (``error`` says why the original must
    go back as it is)."""

    result: str
    countdown: float = 0
    error: str = ""


class Ended(Exception):
    """Stops a message's attempt with its Ending."""

    def __init__(self, ending):
        super().__init__(ending.result)
        self.ending = ending


def backoff(attempt):
    """Seconds before the next attempt: 1, 2, 4 ... up to MAX_BACKOFF_S."""
    return min(2**attempt.retries, MAX_BACKOFF_S)


def last_attempt(attempt):
    """Whether a failure of this attempt dead-letters the message instead of retrying it."""
    return attempt.retries >= MAX_RETRIES


def next_step(attempt):
    """What follows a failed attempt, for its log line: another attempt, or the dead letters after the last one
    (retry() decides; a retry that would come after the message's expiry is dead-lettered too, and logged so)."""
    if last_attempt(attempt):
        return f"dead-lettered after {attempt.retries + 1} attempts"
    return "will retry"


def retry(attempt, exc, countdown, channels=None):
    """Retry in ``countdown`` seconds, or dead-letter once MAX_RETRIES attempts have failed or the retry would come
    after the message expires. Always raises Ended."""
    expires_at = attempt.expires_at(sluice_settings().kinds.get(attempt.kwargs.get("kind")))
    if expires_at is not None and time.time() + countdown >= expires_at:
        dead_letter(attempt, "expired", f"its next attempt would come after its expiry ({describe(exc)})", channels)
    if last_attempt(attempt):
        dead_letter(attempt, "retries_exhausted", exc, channels)
    republish_attempt(attempt, attempt.retries + 1, countdown, channels)
    raise Ended(Ending(RETRIED, countdown, type(exc).__name__))


def back_of_queue(attempt, channels, why):
    """Publish the message again at the end of its queue, due now and with no attempt counted (its channel was
    busy): the worker takes other sends meanwhile, and the message keeps when it was first published. Raises."""
    republish_attempt(attempt, attempt.retries, 0, channels)
    raise Ended(Ending(RETRIED, 0, why))


def republish_attempt(attempt, retries, countdown, channels):
    """Publish this message again; when that fails (the queue at its ceiling, Redis down) requeue the original."""
    kwargs = dict(attempt.kwargs)
    if channels is not None:
        kwargs["channels"] = list(channels)
    try:
        republish(
            attempt.klass,
            attempt.task_id,
            kwargs,
            published_at=attempt.published_at or time.time(),
            retries=retries,
            countdown=countdown,
        )
    except Exception as exc:  # noqa: BLE001 - whatever kept the retry out, the original must not be dropped
        raise Ended(Ending(REQUEUED, error=f"retry not published ({describe(exc)}); the message is requeued")) from None


def dead_letter(attempt, reason, error, channels=None):
    """Keep the message in the dead letters; it is then acked. Raises Ended."""
    keep(attempt, reason, error, channels)
    raise Ended(Ending(DEAD_LETTERED))


def keep(attempt, reason, error, channels):
    """Add the message (its ``channels``, or all) to the dead letters; requeue it (raises Ended) when they cannot
    be written."""
    try:
        letter = deadletters.add(
            attempt.task_name,
            attempt.klass,
            dict(attempt.kwargs),
            reason,
            error,
            attempt.retries + 1,
            channels,
        )
    except Exception as exc:  # noqa: BLE001 - not kept means not handled: the original goes back
        why = f"dead letter not written ({describe(exc)}); the message is requeued"
        raise Ended(Ending(REQUEUED, error=why)) from None
    logger.warning("notification %s dead-lettered (%s): %s", letter.notification_id, reason, letter.error)
    kwargs = attempt.kwargs
    # One more round trip, on the dead letters' path only: the entry names why, for each channel kept.
    activity_fields.record(
        class_redis(attempt.klass),
        activity_fields.Entry(
            str(kwargs.get("user_id", "")),
            str(kwargs.get("kind", "")),
            str(kwargs.get("entity_id", "")),
            str(kwargs.get("notification_id", "")),
            attempt.klass,
            activity_fields.EXPIRED if reason == "expired" else activity_fields.DEAD_LETTERED,
            reason,
            str(letter.error)[: activity_fields.DETAIL_MAX],
            channel=",".join(channels or ()),
        ),
    )


def unexpected(attempt, exc):
    """The ending of a message whose attempt failed in a way no rule foresaw: retried, like any failure."""
    logger.warning(
        "send %s failed unexpectedly, %s",
        attempt.kwargs.get("notification_id"),
        next_step(attempt),
        exc_info=exc,
    )
    try:
        retry(attempt, exc, backoff(attempt), attempt.kwargs.get("channels"))
    except Ended as ended:
        return ended.ending
    raise AssertionError("retry() always ends the attempt")  # pragma: no cover
