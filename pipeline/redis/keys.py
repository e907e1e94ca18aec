"""Every Redis key name Sluice uses, in one place."""

import base64
import hashlib
import json
from functools import lru_cache

from kombu.transport.redis import PRIORITY_STEPS, Channel

PREFIX = "sluice"


def sent(notification_id, channel):
    """The send claim of one notification on one channel: "sending" while a worker sends it (pipeline.broker.marks
    keeps "sent" apart, compactly). A "sent" value here is an older release's mark, still honoured."""
    return f"{PREFIX}:sent:{notification_id}:{channel}"


def sent_marks(bucket, shard):
    """One hash of "sent" marks (field "<id>:<channel>"): the sends finished in one time bucket, one shard of them,
    expired as a whole (pipeline.broker.marks)."""
    return f"{PREFIX}:marks:{bucket}:{shard}"


def counters():
    """Hash of exact, cluster-wide counters; fields are "<metric>:<label>:<label>"."""
    return f"{PREFIX}:counters"


def priority_lists(queue, steps=PRIORITY_STEPS, sep=Channel.sep):
    """The queue's list and its priority sub-lists, named as kombu's Redis transport names them with ``steps`` and
    ``sep`` (its transport options' priority_steps and sep; pipeline.conf.queue_lists passes Sluice's own)."""
    return [queue] + [f"{queue}{sep}{step}" for step in steps if step]


def fold_member(user_id, kind, entity_id):
    """A fold key: a JSON array, so no separator inside an id can merge two keys. [user, kind, entity] for the
    entity grain, [user, kind, null] for user|kind, [user, null, class] for a user's whole class."""
    return json.dumps([user_id, kind, entity_id], ensure_ascii=False, separators=(",", ":"))


def fold_members(user_id, kind, entity_id, klass):
    """fold_member() of the three grains of one event, serialising each part once (admission's hot path)."""
    user, kind_json = _part(user_id), _part(kind)
    entity = json.dumps(entity_id, ensure_ascii=False)
    return f"[{user},{kind_json},{entity}]", f"[{user},{kind_json},null]", f"[{user},null,{_part(klass)}]"


def _part(value):
    if isinstance(value, str):
        return _cached_part(value)
    if type(value) is int:  # a user's pk, on every notify(): what json.dumps writes for an int, without its cost
        return int.__repr__(value)
    return json.dumps(value)


@lru_cache(maxsize=1024)
def _cached_part(value):
    return json.dumps(value, ensure_ascii=False)


def fold(member):
    """Hash of one fold: n (count), p (latest payload), f and l (first and last seen). claim.lua is handed
    ``fold("")`` and adds the member."""
    return f"{PREFIX}:digest:fold:{member}"


def pending():
    """Zset of the fold keys waiting for a flush, scored by first-seen time."""
    return f"{PREFIX}:digest:pending"


def preferences(user_id):
    """Hash of one user's mirrored preferences (notifications.preferences): k:<kind> plans, q quiet, c cadence."""
    return f"{PREFIX}:prefs:{user_id}"


def preferences_rate(user_id):
    """Token bucket of one user's PUTs to the preferences API (pipeline/lua/token_bucket.lua)."""
    return f"{PREFIX}:prefs-rate:{user_id}"


def preferences_rebuilt():
    """Flag held for an hour after a full rebuild of the preferences' mirror."""
    return f"{PREFIX}:prefs:rebuilt"


def throttle(user_id, kind):
    """Zset log of one user's recent events of a throttled kind: notification id -> when."""
    return f"{PREFIX}:throttle:[{_part(user_id)},{_part(kind)}]"


def idempotency(scope, key):
    """A caller's idempotency key, recorded with the outcome of its first call: the scope and the key hashed
    (sha256, 128 bits as unpadded base64url), so a 255-character key costs what a 5-character one does."""
    digest = hashlib.sha256(f"{scope}\n{key}".encode("utf-8", "surrogatepass")).digest()[:16]
    return f"{PREFIX}:idem:{base64.urlsafe_b64encode(digest).decode().rstrip('=')}"


def idempotency_pattern():
    """A SCAN pattern matching every idempotency key (for tools that clean up after themselves)."""
    return f"{PREFIX}:idem:*"


UNTHROTTLED = f"{PREFIX}:throttle:none"  # what admission is handed for a kind without a throttle: never touched
# What admission is handed for the fold store's keys when the class folds on another Redis: never touched.
ELSEWHERE = f"{PREFIX}:folds-elsewhere"
# What admission and the bounded push are handed for a call without an idempotency key: never touched.
NO_IDEMPOTENCY = f"{PREFIX}:idem:none"


def fold_store_size():
    """Hash of the fold store's size: k (fold keys, pending or claimed), b (their payload bytes)."""
    return f"{PREFIX}:digest:size"


def overflow(klass):
    """List of the messages of users who chose instant delivery, waiting for room in the class's queue."""
    return f"{PREFIX}:overflow:{klass}"


def size_trigger():
    """Flag held while a size-triggered flush is in flight, so at most one is."""
    return f"{PREFIX}:digest:size-trigger"


def rejected_burst(klass):
    """Flag held during a burst of rejections, so the log says so once per burst."""
    return f"{PREFIX}:rejected-burst:{klass}"


def refused_burst(klass, what):
    """Flag held during a burst of refusals of one kind (``what``: "folds", "overflow"), so the log says so once."""
    return f"{PREFIX}:refused-burst:{klass}:{what}"


def drain_rate(queue):
    """The queue's drain rate in messages per second over the exporter's window, as it last measured it."""
    return f"{PREFIX}:drain-rate:{queue}"


DIGEST_PREFIX = f"{PREFIX}:digest:"


def claimed(flush_id, member):
    """A fold hash while a flush holds it (claim.lua is handed ``claimed(flush_id, "")`` and adds the member)."""
    return f"{DIGEST_PREFIX}claimed:{flush_id}:{member}"


def claims():
    """Zset of live flush claims: flush id -> lease expiry."""
    return f"{DIGEST_PREFIX}claims"


def claim_set(flush_id):
    """Set of the members one flush holds."""
    return f"{DIGEST_PREFIX}claim:{flush_id}"


def handover(flush_id):
    """Hash on a class's Redis: the members of one flush whose digests went out there from another Redis's store."""
    return f"{DIGEST_PREFIX}handover:{flush_id}"


def flush_backlog():
    """Flag set while a flush that full queues cut short still has keys to publish."""
    return f"{DIGEST_PREFIX}backlog"


def digest_stats():
    """Hash: last_flush_at, last_flush_size, last_flush_at:<trigger> (pipeline.metrics.last_flush_field), and the
    interval beat runs the flush at (pipeline.metrics.BEAT_FLUSH_INTERVAL_FIELD)."""
    return f"{DIGEST_PREFIX}stats"


def gate(channel, partition=""):
    """The channel gate's keys: its state hash, its waiting criticals and its held slots."""
    base = f"{PREFIX}:gate:{channel}:{partition}"
    return [base, f"{base}:critical", f"{base}:active"]


def gate_channel(channel):
    """A partitioned channel's limits as a whole: its bucket hash, its waiting criticals and its held slots."""
    base = f"{PREFIX}:gate-channel:{channel}"
    return [base, f"{base}:critical", f"{base}:active"]


def ingest_rate(token_id):
    """Token bucket of one ingest token (pipeline/lua/token_bucket.lua): tokens left and when it last refilled."""
    return f"{PREFIX}:ingest:rate:{token_id}"


def dead_letters():
    """The dead letters: a zset of entry id -> when it was dead-lettered, oldest first."""
    return f"{PREFIX}:deadletters"


def dead_letter_entries():
    """Hash of entry id -> the dead letter as JSON (pipeline.broker.deadletters)."""
    return f"{PREFIX}:deadletters:entries"


def fetch_consumers(tag=""):
    """Set of the fetching consumers: the reaper's registry (``tag``: a cluster partition's, pipeline.redis.cluster;
    each fetch key of a partition starts with it, so a partition's fetch state lives on its slot)."""
    return f"{tag}{PREFIX}:fetch:consumers"


# A consumer's fetch keys are its prefix, fetch_prefix() + consumer, and one of these suffixes.
FETCH_ALIVE, FETCH_PROCESSING, FETCH_SOURCES, FETCH_TAGS = ":alive", ":processing:", ":sources", ":tags"


def fetch_alive(consumer, tag=""):
    """A consumer's heartbeat: present (with a TTL of fetch_dead_after_s) while the consumer is alive."""
    return f"{fetch_prefix(tag)}{consumer}{FETCH_ALIVE}"


def fetch_reaper_lock(tag=""):
    """Held while one reaper scans the registry, so the consumers take turns rather than all scan at once."""
    return f"{tag}{PREFIX}:fetch:reaper"


def fetch_prefix(tag=""):
    """Prefix of a consumer's fetch keys (the reaper is handed each key whole: pipeline.broker.reaper)."""
    return f"{tag}{PREFIX}:fetch:"


def fetch_processing(consumer, source, tag=""):
    """A consumer's processing list for one source list: messages moved out of the queue, not yet recorded."""
    return f"{fetch_prefix(tag)}{consumer}{FETCH_PROCESSING}{source}"


def fetch_sources(consumer, tag=""):
    """Set of the source lists a consumer fetches from (so a reaper finds its processing lists)."""
    return f"{fetch_prefix(tag)}{consumer}{FETCH_SOURCES}"


def fetch_tags(consumer, tag=""):
    """Set of the delivery tags a consumer holds in kombu's unacked hash (so a reaper restores them at once)."""
    return f"{fetch_prefix(tag)}{consumer}{FETCH_TAGS}"


def bench(*parts):
    """A key of the benchmarks' own (sluice_tools): their recorded sends, paced providers, held-back queues."""
    return ":".join((PREFIX, "bench", *parts))


def breaker(channel, provider):
    """A provider's circuit breaker (pipeline/lua/breaker_*.lua): its state, forcing, and window buckets."""
    return f"{PREFIX}:breaker:{channel}:{provider}"


def breaker_probes(channel, provider):
    """Zset of a half-open breaker's probe leases -> when each expires (a prober that died frees its slot)."""
    return f"{PREFIX}:breaker:{channel}:{provider}:probes"


def inbox_unread(user_id):
    """Hash of one user's unread inbox count: n (the count), w (the generation it was counted at), g (the latest
    generation asked for); notifications.inbox.unread keeps it in step with the database."""
    return f"{PREFIX}:inbox:unread:{user_id}"


def inbox_escalations(klass):
    """Zset of the inbox items of a class's escalating kinds: item id -> when it escalates if still unread."""
    return f"{PREFIX}:inbox:escalate:{klass}"


def inbox_escalating(klass):
    """Zset of the items a drainer took from inbox_escalations: item id -> when its lease runs out (then another
    drainer takes it over)."""
    return f"{PREFIX}:inbox:escalating:{klass}"


def inbox_rate(user_id):
    """Token bucket of one user's changes through the inbox API (read, archive)."""
    return f"{PREFIX}:inbox-rate:{user_id}"


def digest_staged():
    """Zset (every score 0, ordered by name) of the due fold keys a flush staged to claim user by user: a user's keys
    share the prefix of their member, so one range finds them all (digest/lua/claim_users.lua)."""
    return f"{DIGEST_PREFIX}staged"


def housekeeping_lease(task, scope):
    """The lease of one housekeeping task (pipeline.housekeeping) in one scope (a class, or a fold store): held by
    the step that runs, so at most one step of it runs at a time; a token, deleted by its holder at the step's end."""
    return f"{PREFIX}:housekeeping:lease:{task}:{scope}"


def housekeeping_queued(task, scope):
    """Set while a next step of a housekeeping task waits in its queue, so a task never queues a second one."""
    return f"{PREFIX}:housekeeping:queued:{task}:{scope}"


def housekeeping_state():
    """Hash of when each housekeeping task last ran a step and last caught up (fields "<task>:<scope>:<when>"), which
    the exporter turns into how far behind it is."""
    return f"{PREFIX}:housekeeping"


def scheduled_due(klass):
    """Zset of a class's scheduled sends staged for the mover (notifications.scheduling): row id -> when it is due
    (its reserved second, for a class that reserves)."""
    return f"{PREFIX}:sched:due:{klass}"


def scheduled_claimed(klass):
    """Zset of the scheduled sends a mover took: row id -> when its lease runs out (another mover takes it then)."""
    return f"{PREFIX}:sched:claimed:{klass}"


def scheduled_slots(klass):
    """Hash of a class's reservations: second (Unix) -> scheduled sends reserved in it."""
    return f"{PREFIX}:sched:slots:{klass}"


def scheduled_seconds(klass):
    """Zset of the seconds that hold reservations (second -> second), to read a range of them."""
    return f"{PREFIX}:sched:seconds:{klass}"


def scheduled_staged(klass):
    """Until when a class's scheduled sends are staged in Redis (Unix seconds); gone with a Redis that lost its data,
    which makes the mover stage them all again from the database."""
    return f"{PREFIX}:sched:staged:{klass}"


def activity():
    """The activity log's buffer on a class's Redis: a capped stream of admission's decisions and the sends' ends,
    drained into the host's database (notifications.activity.drain)."""
    return f"{PREFIX}:activity"


NO_ACTIVITY = f"{PREFIX}:activity:off"  # what admission is handed while SLUICE_ACTIVITY is off: never touched


def activity_drained():
    """A hash on a class's Redis: the last stream id the activity drain stored (``last``) and how many entries it has
    stored in all (``count``), for sluice_activity_dropped_total."""
    return f"{PREFIX}:activity:drained"


def topic_backlog(klass):
    """Hash of a class's topic fan-outs still running (notifications.topics): job token -> subscribers still to do,
    which the exporter sums into sluice_topic_fanout_backlog."""
    return f"{PREFIX}:topics:backlog:{klass}"
