"""bench cost, memory: bytes of Redis per send claim and per "sent" mark, before (a key each, kept an hour) and
after (pipeline.broker.marks), and what the marks hold at a sustained rate."""

import time
import uuid

from pipeline.broker import marks
from pipeline.connections import script
from pipeline.redis import keys

#: The seed's peak, notifications a second.
PEAK_PER_S = 1500
#: How long a mark lived before pipeline.broker.marks: a key each, for an hour.
OLD_MARK_TTL_S = 3600
BATCH = 5000


def _used(client):
    return client.info("memory")["used_memory"]


def _pipelined(client, commands):
    for start in range(0, len(commands), BATCH):
        pipe = client.pipeline(transaction=False)
        for command in commands[start : start + BATCH]:
            pipe.execute_command(*command)
        pipe.execute()


def claims(client, count):
    """Bytes per send claim ("sending", with its TTL), written by claim_send.lua itself."""
    ids = [uuid.uuid4().hex for _ in range(count)]
    before = _used(client)
    claim = script("claim_send")
    for notification_id in ids:
        mark = marks.field(notification_id, "email")
        claim(keys=[keys.sent(notification_id, "email"), *marks.candidates(mark, since=time.time())], args=[120, mark])
    per = (_used(client) - before) / count
    sample = client.memory_usage(keys.sent(ids[0], "email"), samples=0)
    client.delete(*[keys.sent(i, "email") for i in ids])
    return {"bytes_per_claim": round(per, 1), "memory_usage_one_claim": sample}


def old_marks(client, count):
    """Before: one key per mark ("sent", EX 3600), as finish_send.lua wrote it."""
    ids = [uuid.uuid4().hex for _ in range(count)]
    before = _used(client)
    _pipelined(client, [("SET", keys.sent(i, "email"), "sent", "EX", OLD_MARK_TTL_S) for i in ids])
    per = (_used(client) - before) / count
    sample = client.memory_usage(keys.sent(ids[0], "email"), samples=0)
    for start in range(0, count, BATCH):
        client.delete(*[keys.sent(i, "email") for i in ids[start : start + BATCH]])
    return {"bytes_per_mark": round(per, 1), "memory_usage_one_mark": sample}


def new_marks(client, rate):
    """After: one bucket's worth of marks at ``rate`` a second (what fills the hashes of one bucket), written as
    finish_send.lua writes them (HSET and EXPIREAT on the bucket's shard)."""
    count = int(rate * marks.BUCKET_S)
    now = time.time()
    commands = []
    written = set()
    for _ in range(count):
        mark = marks.field(uuid.uuid4().hex, "email")
        key, expire_at = marks.write_target(mark, now=now)
        commands += [("HSET", key, mark, 1), ("EXPIREAT", key, expire_at)]
        written.add(key)
    before = _used(client)
    _pipelined(client, commands)
    per = (_used(client) - before) / count
    encodings = {}
    for key in list(written)[:50]:
        encoding = client.object("encoding", key)
        encodings[encoding.decode() if isinstance(encoding, bytes) else encoding] = (
            encodings.get(encoding.decode() if isinstance(encoding, bytes) else encoding, 0) + 1
        )
    for batch in range(0, len(written), BATCH):
        client.delete(*list(written)[batch : batch + BATCH])
    return {
        "bytes_per_mark": round(per, 1),
        "marks_in_one_bucket": count,
        "hashes_in_one_bucket": len(written),
        "encoding_of_50_hashes": encodings,
    }


def run(client, rate=PEAK_PER_S, sample=50_000):
    """Claims and marks, before and after, and the marks held at ``rate`` sustained."""
    before, after = old_marks(client, sample), new_marks(client, rate)
    lifetime = marks.lifetime_s()
    held_before = before["bytes_per_mark"] * rate * OLD_MARK_TTL_S
    # A mark lives lifetime_s() to lifetime_s() + BUCKET_S: the live buckets number (lifetime + width) / width.
    held_after = after["bytes_per_mark"] * rate * (lifetime + marks.BUCKET_S)
    return {
        "send_claim": claims(client, 10_000),
        "sent_mark_before": {**before, "lifetime_s": OLD_MARK_TTL_S},
        "sent_mark_after": {**after, "lifetime_s": lifetime, "bucket_s": marks.BUCKET_S, "shards": marks.SHARDS},
        "rate_per_s": rate,
        "marks_held_at_rate_mib_before": round(held_before / 2**20, 1),
        "marks_held_at_rate_mib_after": round(held_after / 2**20, 1),
        "marks_held_ratio_before_over_after": round(held_before / held_after, 1),
    }
