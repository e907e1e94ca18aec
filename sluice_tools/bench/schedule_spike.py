"""bench schedule --part spike: 10,000 critical reminders due in the same second, on a pool measured at its rate.

The critical pool is the incident's 55 a second (8 slots, a provider taking 145 ms a send), measured first by
draining a burst of sends of the moment; SLUICE_SCHEDULE["critical"] says 55, of which 0.8 (44 a second) is
reservable. With a 100 s window exactly 100 × 44 reminders are scheduled and the rest refused at scheduling time,
each told the earliest second with room (checked, then all cancelled). With a 240 s window every reminder is
scheduled; the real mover thread and the pool then send them: when the first and the last went, how many after
their send_at, and the most sent in any one second.
"""

import math
import threading
import time
from collections import Counter
from datetime import UTC, datetime

from django.test import override_settings

from notifications import Outcome, cancel_scheduled, notify, notify_many
from notifications.scheduling import runner
from notifications.scheduling.models import ScheduledSend
from pipeline.connections import get_redis
from pipeline.redis import keys
from sluice_tools.processes import WorkerProcess

from . import incident
from .provider import sent_records
from .schedule_common import KEY, KIND, RATE_PER_S, RESERVABLE, bench_users, kinds, quantiles, schedule_setting

REMINDERS = 10_000
WINDOW_FITS_S = 240
WINDOW_SHORT_S = 100
SLOTS = 8  # 8 × 1000 / 145 ms: the incident's 55 sends a second
CHUNK = 1000
RATE_PROBE = 330  # six seconds of the pool's sending


def per_s(rate_per_s=RATE_PER_S):
    """The scheduled sends one second of the pool holds."""
    return math.floor(rate_per_s * RESERVABLE)


def settings_for(window_s, count, rate_per_s=RATE_PER_S):
    return {
        "SLUICE_KINDS": kinds(window_s),
        "SLUICE_SCHEDULE": schedule_setting(rate_per_s=rate_per_s, max_per_user=10),
        "SLUICE_QUEUES": {"critical": {"capacity": count + 1000, "wait_ms": 250}},
    }


def window_that_fits(count, rate_per_s, scale):
    """240 s for 10,000 at 44 a second (227 s of the rate, and room); as many seconds as fit, scaled down."""
    if scale == 1 and rate_per_s == RATE_PER_S:
        return WINDOW_FITS_S
    return math.ceil(count / per_s(rate_per_s)) + round(12 * scale) + 1


def schedule(users, send_at, entity):
    """Every user's reminder for ``send_at``, a notify_many() a chunk; return (scheduled, [(user, available_at)])."""
    scheduled, refused = 0, []
    for start in range(0, len(users), CHUNK):
        result = notify_many(users[start : start + CHUNK], KIND, entity_id=entity, payload={"t0": send_at},
                             send_at=send_at, key=KEY)  # fmt: skip
        scheduled += result.counts.get(Outcome.SCHEDULED, 0)
        refused.extend((user, result.available_at) for user in result.rejected)
    return scheduled, refused


def reserved(client):
    return {int(s): int(n) for s, n in client.hgetall(keys.scheduled_slots("critical")).items()}


def refused_part(client, users, window_s):
    """The window that does not fit: how many are scheduled, how many refused, whether each refusal's time has room
    (the first refused user is scheduled there), and the reserved seconds; then everything is cancelled."""
    with override_settings(**settings_for(window_s, len(users))):
        send_at = math.ceil(time.time()) + 3600
        began = time.perf_counter()
        scheduled, refused = schedule(users, send_at, "spike-short")
        took = time.perf_counter() - began
        seconds = reserved(client)
        times = Counter(at for _user, at in refused)
        room = {at: per_s() - seconds.get(int(at), 0) for at in times if at}
        retried = None
        if refused and refused[0][1]:
            user, at = refused[0]
            retried = str(notify(user, KIND, entity_id="spike-short", payload={"t0": at}, send_at=at, key=KEY))
        part = {
            "window_s": window_s,
            "reminders": len(users),
            "scheduled": scheduled,
            "expected_scheduled": window_s * per_s(),
            "refused": len(refused),
            "refusals_naming_a_time": sum(1 for _u, at in refused if at),
            "refusal_times": {_clock(at, send_at): n for at, n in times.items() if at},
            "refusal_time_has_room": all(n > 0 for n in room.values()) and len(room) == len(times),
            "refused_then_scheduled_at_that_time": retried,
            "reserved_seconds": len([s for s in seconds if send_at - window_s < s <= send_at]),
            "most_in_one_second": max(seconds.values(), default=0),
            "first_due": _clock(min(seconds, default=send_at), send_at),
            "scheduling_s": round(took, 2),
        }
        part["cancelled"] = cancel_scheduled(KIND, "spike-short")
        part["reserved_after_cancel"] = sum(reserved(client).values())
    part["holds"] = (
        part["scheduled"] == part["expected_scheduled"]
        and part["refused"] == len(users) - part["expected_scheduled"]
        and part["refusals_naming_a_time"] == part["refused"]
        and part["refusal_time_has_room"]
        and part["most_in_one_second"] <= per_s()
        and part["reserved_after_cancel"] == 0
    )
    return part


def pool_rate(client, count):
    """The critical pool's real rate: ``count`` sends of the moment at once, sends a second from first to last."""
    client.delete(keys.bench("sent"))
    probe = bench_users("bench-spike", 1)[0]
    for n in range(count):
        notify(probe, "meeting.cancelled", entity_id=f"probe-{n}", payload={"t0": time.time()})
    deadline = time.time() + 120
    while len(sent_records(client)) < count and time.time() < deadline:
        time.sleep(0.2)
    records = sent_records(client)
    client.delete(keys.bench("sent"))
    span = max(r["done"] for r in records) - min(r["started"] for r in records)
    return round(len(records) / span, 1)


def on_time_part(client, redis_url, users, scale, margin_s, stdout):
    """The window that fits: the pool's rate measured, the reminders scheduled at that rate (55 a second, or what the
    pool sends when that is less), then the mover and the pool send them; when each went against send_at."""
    conf = settings_for(WINDOW_FITS_S, len(users))
    provider = {"backend": "sluice_tools.bench.provider.SimulatedProvider", "options": {"latency_ms": 145}}
    conf["SLUICE_CHANNELS"] = {name: provider for name in ("email", "sms", "push")}
    stop = threading.Event()
    with override_settings(**conf):
        worker = WorkerProcess("critical", redis_url, extra=["--concurrency", str(SLOTS)],
                               env=incident.worker_env(conf))  # fmt: skip
        worker.start()
        mover = threading.Thread(target=runner.run, args=("critical", stop), name="bench-mover", daemon=True)
        try:
            measured = pool_rate(client, max(40, round(RATE_PROBE * len(users) / REMINDERS)))
            rate = min(RATE_PER_S, math.floor(measured))
            window_s = window_that_fits(len(users), rate, scale)
            stdout.write(
                f"  the critical pool sends {measured}/s: SLUICE_SCHEDULE['critical']['rate_per_s'] {rate} "
                f"({per_s(rate)} a second reservable); a {window_s} s window"
            )
            with override_settings(**settings_for(window_s, len(users), rate)):
                send_at = math.ceil(time.time()) + window_s + margin_s
                scheduled, refused = schedule(users, send_at, "spike")
                seconds = reserved(client)
                mover.start()
                deadline = send_at + 120
                while time.time() < deadline and (
                    len(sent_records(client)) < scheduled or ScheduledSend.objects.filter(entity_id="spike").exists()
                ):
                    time.sleep(0.5)
                time.sleep(0.5)
        finally:
            stop.set()
            if mover.is_alive():
                mover.join(10)
            worker.stop()
    records = [r for r in sent_records(client) if r["entity_id"] == "spike"]
    by_id = Counter(r["id"] for r in records)
    late = [r["done"] - send_at for r in records]
    each_second = Counter(int(r["started"]) for r in records)
    part = {
        "window_s": window_s,
        "pool_rate_measured_per_s": measured,
        "rate_per_s": rate,
        "reminders": len(users),
        "scheduled": scheduled,
        "refused": len(refused),
        "reserved_most_in_one_second": max(seconds.values(), default=0),
        "first_due": _clock(min(seconds, default=send_at), send_at),
        "sent": len(by_id),
        "lost": scheduled - len(by_id),
        "doubled": sum(1 for n in by_id.values() if n > 1),
        "first_sent": _clock(min(r["started"] for r in records), send_at) if records else None,
        "last_sent": _clock(max(r["done"] for r in records), send_at) if records else None,
        "sent_after_send_at": sum(1 for s in late if s > 0),
        "late_over_1s": sum(1 for s in late if s > 1),
        "sent_minus_send_at": quantiles(late),
        "most_sent_in_one_second": max(each_second.values(), default=0),
    }
    part["holds"] = (
        part["scheduled"] == len(users) and part["lost"] == 0 and part["doubled"] == 0 and part["late_over_1s"] == 0
    )
    return part


def run(redis_url, scale, stdout):
    """Both windows; return the report's part."""
    client = get_redis()
    client.flushdb()
    count = max(50, round(REMINDERS * scale))
    short = max(1, round(WINDOW_SHORT_S * scale))
    users = bench_users("bench-spike", count)
    ScheduledSend.objects.filter(entity_id__in=("spike", "spike-short")).delete()
    stdout.write(f"  {count:,} reminders due in one second, a {short} s window")
    short_part = refused_part(client, users, short)
    stdout.write(
        f"  {short_part['scheduled']:,} scheduled, {short_part['refused']:,} refused at scheduling time (each told "
        f"{', '.join(short_part['refusal_times'])})"
    )
    stdout.write(f"  {count:,} reminders due in one second, a window that fits: sent by the pool")
    margin = max(10, math.ceil(short_part["scheduling_s"] * 3) + 5)
    fits_part = on_time_part(client, redis_url, users, scale, margin, stdout)
    stdout.write(
        f"  {fits_part['scheduled']:,} scheduled, first sent {fits_part['first_sent']}, last {fits_part['last_sent']}, "
        f"{fits_part['sent_after_send_at']} after send_at, {fits_part['lost']} lost, {fits_part['doubled']} doubled"
    )
    return {
        "short_window": short_part,
        "window_that_fits": fits_part,
        "holds": short_part["holds"] and fits_part["holds"],
    }


def _clock(at, send_at):
    """``at`` as the clock shows it if send_at were 09:50:00 (the docs' example), with its offset."""
    offset = at - send_at
    shown = datetime(2026, 12, 3, 9, 50, tzinfo=UTC).timestamp() + offset
    return f"{datetime.fromtimestamp(shown, UTC).strftime('%H:%M:%S')} ({offset:+.1f} s)"
