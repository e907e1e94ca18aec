"""bench schedule --part lateness: scheduled critical reminders due while the incident replays beside them.

Sluice's pools as bench incident runs them (12 slots, a provider taking 145 ms a send), the incident's 9,360 events in
40 s, and four meetings' reminders for 180 attendees each, due a quarter of the burst apart, with the real mover
thread (notifications.scheduling.runner) in this process. Each reminder carries its send_at as the provider's t0, so
the provider's record gives sent - send_at at the worker's send: when the call began, and when it returned.
"""

import math
import threading
import time
from collections import Counter

from django.contrib.auth import get_user_model
from django.test import override_settings

from notifications import Outcome, notify_many
from notifications.scheduling import runner
from notifications.scheduling.models import ScheduledSend
from pipeline.connections import get_redis

from . import incident, traffic
from .common import percentile
from .provider import sent_records
from .schedule_common import KEY, KIND, bench_users, kinds, quantiles, schedule_setting

MEETINGS = 4
ATTENDEES = 180
WARMUP_S = 5.0
PREFIX = "sched-"
# The default share, and one that leaves the incident's own critical sends (14 a second, a third of the pool's 41)
# their room: the reservation promises on time only to a pool whose unreserved share carries the sends of the moment.
RESERVABLES = (0.8, 0.5)
FITTING = 0.5


def settings_for(scale, flush_interval_s, reservable):
    """The incident's Sluice settings, the reminder with its window, the critical pool's rate as it sends."""
    conf = incident.settings_for("sluice", flush_interval_s, scale)
    conf["SLUICE_KINDS"] = kinds()
    rate = math.floor(incident.pool_rate(incident.SLUICE_POOLS["critical"]))
    conf["SLUICE_SCHEDULE"] = schedule_setting(rate_per_s=rate, reservable=reservable)
    return conf


def schedule_reminders(users, started, burst_s):
    """Each meeting's reminders, due at whole seconds spread over the burst; return {entity: send_at}."""
    due = {}
    for n in range(MEETINGS):
        when = math.ceil(started + WARMUP_S + burst_s * (n + 0.5) / MEETINGS)
        name = f"{PREFIX}{n}"
        result = notify_many(users, KIND, entity_id=name, payload={"t0": when, "title": name}, send_at=when, key=KEY)
        if result.counts != {Outcome.SCHEDULED: len(users)}:
            raise RuntimeError(f"meeting {n}: {result.counts}, {len(result.rejected)} rejected")
        due[name] = when
    return due


def replay(client, started, scale, flush_interval_s, progress):
    """The incident's events at their offsets from ``started``, with beat's flush and drain; then until drained."""
    from digest.flush import drain, flush

    users = {pk: get_user_model()(pk=pk) for pk in range(1, traffic.PARTICIPANTS + 1)}
    burst_s = traffic.BURST_SECONDS * scale
    schedule = sorted(
        traffic.background(WARMUP_S + burst_s + 30) + [(WARMUP_S + t, *rest) for t, *rest in traffic.burst(scale)]
    )
    outcomes = Counter()
    next_flush, next_drain = started + flush_interval_s, started + incident.DRAIN_EVERY_S
    for offset, klass, kind, user, entity in schedule:
        if offset > WARMUP_S + burst_s and incident.drained(client, "sluice"):
            break
        delay = started + offset - time.time()
        if delay > 0:
            time.sleep(delay)
        incident.publish("sluice", users[user], klass, kind, entity, outcomes)
        next_flush, next_drain = incident.beat("sluice", flush, drain, next_flush, next_drain, flush_interval_s)
        if progress:
            progress(time.time() - started)
    return outcomes, (flush, drain, next_flush, next_drain)


def run(redis_url, scale, stdout, database_url, reservable):
    """Replay and measure with ``reservable`` of the critical pool's rate for scheduled sends; return the result."""
    client = get_redis()
    client.flushdb()
    flush_interval_s = max(15, round(60 * scale))
    conf = settings_for(scale, flush_interval_s, reservable)
    env = incident.worker_env(conf, database_url)
    users = bench_users("bench-schedule-late", max(4, round(ATTENDEES * scale)))
    burst_s = traffic.BURST_SECONDS * scale
    stop = threading.Event()
    with override_settings(**conf):
        workers = incident.start_workers("sluice", redis_url, env)
        mover = threading.Thread(target=runner.run, args=("critical", stop), name="bench-mover", daemon=True)
        try:
            started = time.time() + 3
            due = schedule_reminders(users, started, burst_s)
            mover.start()
            offsets = ", ".join(f"+{t - started:.0f}" for t in due.values())
            stdout.write(f"  {len(users) * MEETINGS} reminders due at {offsets} s into the replay")
            outcomes, (flush, drain, next_flush, next_drain) = replay(client, started, scale, flush_interval_s, None)
            deadline = time.time() + 600
            while time.time() < deadline and not (
                incident.drained(client, "sluice") and not ScheduledSend.objects.filter(user__in=users).exists()
            ):
                next_flush, next_drain = incident.beat("sluice", flush, drain, next_flush, next_drain, flush_interval_s)
                time.sleep(0.5)
            time.sleep(incident.SEND_LATENCY_MS / 1000 * 3)  # the last sends finish
        finally:
            stop.set()
            mover.join(10)
            for worker in workers:
                worker.stop()
    report = summarize(sent_records(client), due, len(users), outcomes, scale)
    rate = conf["SLUICE_SCHEDULE"]["critical"]["rate_per_s"]
    report.update(rate_per_s=rate, reservable=reservable, reserved_per_s=math.floor(rate * reservable))
    return report


def summarize(records, due, attendees, outcomes, scale):
    """Lateness of the reminders (sent - send_at), their books, and the incident's own critical p99 beside them."""
    mine = [r for r in records if r["class"] == "critical" and (r["entity_id"] or "").startswith(PREFIX)]
    by_id = Counter(r["id"] for r in mine)
    first = {r["id"]: r for r in reversed(mine)}.values()  # one record a reminder (its first send)
    begun = [r["started"] - due[r["entity_id"]] for r in first]
    returned = [r["done"] - due[r["entity_id"]] for r in first]
    instant = [
        (r["started"] - r["t0"]) * 1000
        for r in records
        if r["class"] == "critical" and not (r["entity_id"] or "").startswith(PREFIX) and r["t0"]
    ]
    expected = attendees * MEETINGS
    report = {
        "scale": scale,
        "reminders": expected,
        "meetings": MEETINGS,
        "incident_events": sum(outcomes.values()),
        "incident_outcomes": {f"{k}:{o}": n for (k, o), n in sorted(outcomes.items())},
        "sent": len(by_id),
        "lost": expected - len(by_id),
        "doubled": sum(1 for n in by_id.values() if n > 1),
        "lateness_at_send_start": quantiles(begun),
        "lateness_at_provider_return": quantiles(returned),
        "sent_early_within_window": sum(1 for s in returned if s < 0),
        "late_over_1s": sum(1 for s in returned if s > 1),
        "late_over_2s": sum(1 for s in returned if s > 2),
        "incident_critical_p99_ms": round(percentile(instant, 99), 1) if instant else None,
        "incident_critical_max_ms": round(max(instant), 1) if instant else None,
    }
    late = report["lateness_at_provider_return"]
    report["holds"] = bool(
        report["lost"] == 0
        and report["doubled"] == 0
        and late["p99_s"] is not None
        and late["p99_s"] <= 1
        and late["max_s"] <= 2
    )
    return report
