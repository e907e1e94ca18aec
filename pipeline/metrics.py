"""Exact, cluster-wide metrics kept in one Redis hash: the field names, and the recording helpers.

Counters live in Redis, not in each process, so every worker and web pod adds to the same numbers.
Admission counts inside its own Lua step and a send inside the script that ends it, so recording
adds no round trip to either hot path. Labels are classes, queues, channels and outcomes: never a
user id, never a payload.
"""

import bisect
import logging

from redis.exceptions import RedisError

from pipeline.connections import class_redis, every_redis, get_redis
from pipeline.redis import keys

BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, float("inf"))
OUTCOMES = ("accepted", "folded", "collapsed", "deferred", "suppressed", "rejected")
FOLD_REASONS = ("overflow", "preference", "quiet", "cadence", "throttle", "refused")
FOLD_GRAINS = ("entity", "kind", "user")


def fold_field(klass, reason):
    """sluice_folds_total{class, reason}: events folded into the digest, by why."""
    return f"folds:{klass}:{reason}"


def fold_grain_field(klass, grain):
    """sluice_fold_grains_total{class, grain}: events folded, by the grain of the key that took them."""
    return f"foldgrain:{klass}:{grain}"


SEND_STATUSES = ("sent", "failed", "rejected", "duplicate", "expired")


def notifications_field(klass, outcome):
    """sluice_notifications_total{class, outcome}."""
    return f"notifications:{klass}:{outcome}"


def idempotent_replay_field(klass):
    """sluice_idempotent_replays_total{class}: calls that repeated a recorded idempotency key, answered with the
    first call's outcome and publishing nothing."""
    return f"idempotent_replays:{klass}"


def sent_field(channel, klass, status):
    """sluice_sent_total{channel, class, status}."""
    return f"sent:{channel}:{klass}:{status}"


def duration_fields(channel, klass, seconds):
    """The bucket, sum and count fields of sluice_send_duration_seconds for one send."""
    le = BUCKETS[bisect.bisect_left(BUCKETS, seconds)]
    base = f"send_duration:{channel}:{klass}"
    return f"{base}:le:{le}", f"{base}:sum", f"{base}:count"


#: How late a scheduled send went out after its send_at, in seconds (an early one, within its kind's window, is 0).
LATENESS_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 300.0, float("inf"))


def lateness_fields(klass, seconds):
    """The bucket, sum and count fields of sluice_scheduled_lateness_seconds{class} for one scheduled send."""
    le = LATENESS_BUCKETS[bisect.bisect_left(LATENESS_BUCKETS, seconds)]
    base = f"scheduled_lateness:{klass}"
    return f"{base}:le:{le}", f"{base}:sum", f"{base}:count"


#: What became of scheduled sends: scheduled, moved (scheduled again), cancelled, published by the mover, expired
#: (past their kind's expiry when published: the send dead-letters them), or rejected (no room in their window).
SCHEDULED_RESULTS = ("scheduled", "moved", "cancelled", "published", "expired", "rejected")


#: sluice_fanout_users_total's outcomes: an Outcome's name, or what kept a user from one.
FANOUT_RESULTS = (
    "accepted",
    "folded",
    "collapsed",
    "deferred",
    "suppressed",
    "scheduled",
    "rejected",
    "unknown",
    "failed",
    "schedule_full",
)


def fanout_field(klass, outcome):
    """sluice_fanout_users_total{class, outcome}: users of notify_many() and topics, by what became of them."""
    return f"fanout:{klass}:{outcome}"


def scheduled_field(klass, result):
    """sluice_scheduled_total{class, result}."""
    return f"scheduled:{klass}:{result}"


def digest_published_field(klass):
    """Digest messages of a class that flushes published: with accepted events, what arrived at its queue."""
    return f"digest:{klass}:published"


def processed_field(klass):
    """Messages of a class that workers finished, the base of throughput and drain time."""
    return f"processed:{klass}"


def durability_field(klass, step):
    """sluice_durability_unconfirmed_total{class, step}: a replicated class's writes its replicas did not confirm
    in time (pipeline.durability.STEPS)."""
    return f"durability:{klass}:{step}"


def count_unconfirmed(exc):
    """Count a NotReplicated (pipeline.errors) on its class's Redis, best effort."""
    count(durability_field(exc.klass, exc.step), klass=exc.klass)


logger = logging.getLogger("sluice.metrics")


def count(field, amount=1, klass=None):
    """Add to one counter (a class's counter on its class's Redis), best effort: a counter that cannot be
    written never fails the work it counts."""
    try:
        (class_redis(klass) if klass else get_redis()).hincrby(keys.counters(), field, amount)
    except RedisError as exc:
        logger.warning("counter %s not written: %s", field, type(exc).__name__)


def count_many(amounts, klass=None):
    """count() for several counters ({field: amount}) in one round trip, best effort as count() is."""
    if not amounts:
        return
    try:
        pipe = (class_redis(klass) if klass else get_redis()).pipeline(transaction=False)
        for name, amount in amounts.items():
            pipe.hincrby(keys.counters(), name, amount)
        pipe.execute()
    except RedisError as exc:
        logger.warning("counters %s not written: %s", sorted(amounts), type(exc).__name__)


def read_counters(client=None):
    """Every counter, as {field: number}: of ``client``'s Redis, or summed over every Redis Sluice uses."""
    totals = {}
    for each in [client] if client is not None else every_redis():
        for k, v in each.hgetall(keys.counters()).items():
            totals[k.decode()] = totals.get(k.decode(), 0.0) + float(v)
    return totals


DEAD_LETTER_REASONS = ("retries_exhausted", "permanent", "unknown_kind", "undecodable", "expired", "suppressed")


def dead_letter_field(klass, reason):
    """sluice_dead_letters_total{class, reason}."""
    return f"deadletters:{klass}:{reason}"


DEAD_LETTERS_DROPPED = "deadletters:dropped"
DEAD_LETTERS_REPLAYED = "deadletters:replayed"

#: A breaker's states, as sluice_provider_state exports them (0, 1, 2).
PROVIDER_STATES = ("closed", "half_open", "open")
#: What one call to a provider came to: accepted, failed (transient), rejected (permanent), or skipped because
#: its breaker was open.
PROVIDER_OUTCOMES = ("accepted", "failed", "rejected", "skipped")
#: A delivery status record's statuses, in the order they may move (pipeline never moves one back).
DELIVERY_STATUSES = ("sent", "delivered", "failed", "bounced", "complained")
DELIVERY_UNMATCHED = "delivery:unmatched"
#: What became of one event of an ESP's tracking webhook: it moved its record (updated), changed nothing
#: (unchanged), came before the worker's record (created), matched no record of a provider sending through that ESP
#: (unmatched), named another recipient than the one sent to (other_recipient), said nothing about delivery
#: (ignored), or was dropped past SLUICE_TRACKING_MAX_EVENTS (over_cap); refused counts requests refused because the
#: webhook has no secret or signing key.
TRACKING_RESULTS = ("updated", "unchanged", "created", "unmatched", "other_recipient", "ignored", "over_cap", "refused")
DELIVERY_PRUNED = "delivery:pruned"


def provider_transition_prefix(channel, provider):
    """sluice_provider_transitions_total{channel, provider, to}: the field is this prefix and the new state."""
    return f"provider_transitions:{channel}:{provider}:"


def provider_call_field(channel, provider, outcome):
    """sluice_provider_calls_total{channel, provider, outcome}."""
    return f"provider_calls:{channel}:{provider}:{outcome}"


def delivery_status_field(channel, provider, status):
    """sluice_delivery_status_total{channel, provider, status}: records that reached ``status``."""
    return f"delivery_status:{channel}:{provider}:{status}"


def tracking_field(provider, result):
    """sluice_tracking_events_total{provider, result}: an ESP's tracking events (``provider`` is the ESP)."""
    return f"tracking_events:{provider}:{result}"


def suppression_field(reason):
    """sluice_suppressions_added_total{reason}: addresses suppressed after a bounce or a complaint."""
    return f"suppressions:{reason}"


#: Gauges of the digest flush, for the SluiceDigestFlushStalled alert: when each trigger last flushed, and the
#: interval Sluice's beat runs the flush at (what its schedule holds, recorded by beat in the digest stats field
#: BEAT_FLUSH_INTERVAL_FIELD; pipeline.broker.beat_schedule).
DIGEST_LAST_FLUSH = "sluice_digest_last_flush_timestamp_seconds"
DIGEST_FLUSH_INTERVAL = "sluice_digest_flush_interval_seconds"
FLUSH_TRIGGERS = ("beat", "size", "backlog")
BEAT_FLUSH_INTERVAL_FIELD = "beat_flush_interval_s"


def last_flush_field(trigger):
    """The digest stats field holding when a flush of ``trigger`` last ran (seconds since the epoch)."""
    return f"last_flush_at:{trigger}"


#: What a send to the inbox did: a new item, or folded into the unread item of the same user, kind and entity.
INBOX_RESULTS = ("created", "folded")
#: What became of an escalation: sent (admitted as an event of its kind: sent at once, or folded into the user's
#: digest or held by their choices), or cancelled (read or archived first, gone, or every channel off).
ESCALATION_RESULTS = ("sent", "cancelled")


def inbox_items_field(kind, result):
    """sluice_inbox_items_total{kind, result}: sends to the inbox, by whether they made a row or folded into one."""
    return f"inbox_items:{kind}:{result}"


#: sluice_inbox_reads_total: items marked read through the API.
INBOX_READS = "inbox:reads"
#: sluice_inbox_pruned_total: items deleted past SLUICE_INBOX's max_items or retention_days.
INBOX_PRUNED = "inbox:pruned"


def escalation_field(klass, result):
    """sluice_inbox_escalations_total{class, result}: unread items escalated, or cancelled before."""
    return f"inbox_escalations:{klass}:{result}"


#: A digest's messages and the events inside them (digest.grouping): events per message is their ratio.
DIGEST_MESSAGES = "sluice_digest_messages"
DIGEST_EVENTS = "sluice_digest_events"


def digest_messages_field(klass):
    """sluice_digest_messages_total{class}: digest messages published by a flush."""
    return f"digest_messages:{klass}"


def digest_events_field(klass):
    """sluice_digest_events_total{class}: the folded events those messages carry."""
    return f"digest_events:{klass}"


#: sluice_housekeeping_steps_total{task, scope, result}: steps of a housekeeping task (pipeline.housekeeping) that
#: caught up, left work for the next step, or were skipped (another step of the task held its lease).
HOUSEKEEPING_PREFIX = "housekeeping:"


def housekeeping_field(task, scope, result):
    """sluice_housekeeping_steps_total{task, scope, result}."""
    return f"{HOUSEKEEPING_PREFIX}{task}:{scope}:{result}"


#: sluice_activity_dropped_total: activity entries trimmed from a buffer before the drain stored them (per Redis,
#: read from the stream itself by the exporter, pipeline.activity_fields.dropped).
ACTIVITY_DROPPED = "sluice_activity_dropped"
#: sluice_activity_drained_total: entries the drain stored (or skipped: their user is gone).
ACTIVITY_DRAINED = "activity:drained"
#: sluice_activity_pruned_total: entries deleted past SLUICE_ACTIVITY["retention_days"].
ACTIVITY_PRUNED = "activity:pruned"
