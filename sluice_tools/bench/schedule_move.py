"""bench schedule --part move: the incident as scheduled sends. 180 attendees of a weekly meeting, 52 occurrences
each (9,360 reminders), moved a year ahead: once by one notify() a reminder, once by one notify_many() an occurrence.

Each move is measured (wall time, this process's CPU, Redis's commands and CPU from INFO, database queries), then
the mover runs at every old time and every new time with a controlled clock (the stager, then mover.drain, as its
thread's step does): what it publishes is taken from the critical queue and counted per attendee and occurrence.
The proof: nothing at an old time, exactly one at each new time, nothing left in the database.
"""

import contextlib
import math
import os
import time
from collections import Counter

from django.db import connection
from django.test import override_settings

from notifications import Outcome, notify, notify_many
from notifications.scheduling import mover, stager
from notifications.scheduling.models import ScheduledSend
from pipeline.connections import get_redis
from pipeline.redis import keys

from .meter import Snapshot
from .schedule_common import KEY, KIND, bench_users, kinds, schedule_setting, take_published

ATTENDEES = 180
OCCURRENCES = 52
WEEK_S = 7 * 86400
YEAR_S = 364 * 86400  # 52 weeks: the meeting keeps its weekday
# The first occurrence's reminder comes soon (so it is staged in Redis when the meeting moves), the rest weekly.
FIRST_IN_S = 600
# Moved a year ahead, the last reminder is two years away: the bench's horizon allows it (the default is 400 days).
HORIZON_DAYS = 800
METHODS = ("notify", "notify_many")


class Queries:
    """Counts the database queries this process runs (Django's execute wrapper)."""

    def __init__(self):
        self.count = 0

    def __call__(self, execute, sql, params, many, context):
        self.count += 1
        return execute(sql, params, many, context)


@contextlib.contextmanager
def measured(client, into):
    """Fill ``into`` with the block's wall time, CPU, Redis commands and CPU, and database queries."""
    queries = Queries()
    before = Snapshot(client, {"producer": os.getpid()})
    with connection.execute_wrapper(queries):
        yield
    delta = before.until(Snapshot(client, {"producer": os.getpid()}))
    into.update(
        wall_s=round(delta["seconds"], 3),
        producer_cpu_s=round(delta["cpu_s"]["producer"], 3),
        redis_commands=int(sum(delta["commands"].values())),
        redis_commands_by_name=dict(sorted(delta["commands"].items())),
        redis_cpu_ms=round(delta["redis_cpu_s"] * 1000, 1),
        db_queries=queries.count,
    )


def occurrence_times(count, start):
    """The reminders' send_at of ``count`` weekly occurrences from ``start`` (whole seconds)."""
    return [start + n * WEEK_S for n in range(count)]


def entity(n):
    return f"weekly-standup@{n}"


def schedule_all(users, times):
    """The meeting's reminders at ``times``: one notify_many() an occurrence."""
    for n, when in enumerate(times):
        result = notify_many(users, KIND, entity_id=entity(n), payload={"title": "Weekly", "at": when}, send_at=when,
                             key=KEY)  # fmt: skip
        if result.counts != {Outcome.SCHEDULED: len(users)}:
            raise RuntimeError(f"occurrence {n}: {result.counts}, rejected {len(result.rejected)}")


def move(method, users, times):
    """Move every reminder to ``times`` by ``method``; return how many calls it took."""
    calls = 0
    for n, when in enumerate(times):
        payload = {"title": "Weekly (moved)", "at": when}
        if method == "notify_many":
            result = notify_many(users, KIND, entity_id=entity(n), payload=payload, send_at=when, key=KEY)
            if result.moved != len(users):
                raise RuntimeError(f"occurrence {n}: {result.moved} of {len(users)} moved ({result.counts})")
            calls += 1
            continue
        for user in users:
            if notify(user, KIND, entity_id=entity(n), payload=payload, send_at=when, key=KEY) != Outcome.SCHEDULED:
                raise RuntimeError(f"occurrence {n}: not scheduled")
            calls += 1
    return calls


def run_mover_at(client, moment):
    """The mover's work at ``moment`` (Unix seconds): stage the window, publish what is due; return what it
    published (the send-task kwargs)."""
    while stager.stage_window("critical", now=moment - 60):
        pass
    mover.drain("critical", now=moment)
    return take_published(client)


def prove(client, users, old, new):
    """Run the mover at every old and every new time; return the counts the proof is made of."""
    at_old, at_new, wrong_time = 0, Counter(), 0
    for when in old:
        at_old += len(run_mover_at(client, when + 1))
    for n, when in enumerate(new):
        for sent in run_mover_at(client, when + 1):
            at_new[sent["user_id"], sent["entity_id"]] += 1
            wrong_time += sent["entity_id"] != entity(n) or abs(sent["send_at"] - when) > 0.001
    expected = {(user.pk, entity(n)) for user in users for n in range(len(new))}
    return {
        "published_at_old_times": at_old,
        "published_at_new_times": sum(at_new.values()),
        "reminders_sent_exactly_once": sum(1 for k in expected if at_new[k] == 1),
        "reminders_missing": sum(1 for k in expected if at_new[k] == 0),
        "reminders_doubled": sum(1 for n in at_new.values() if n > 1),
        "published_at_a_wrong_time": wrong_time,
        "rows_left": ScheduledSend.objects.filter(user__in=users).count(),
    }


def reset_staging(client):
    """Forget the previous method's staging marker and claims: each method's proof starts as a fresh beat."""
    for name in (keys.scheduled_staged("critical"), keys.scheduled_due("critical"), keys.scheduled_claimed("critical")):
        client.delete(name)


def run(scale=1.0, stdout=None):
    """Both moves, each measured and proved; return the report's part."""
    attendees = max(2, round(ATTENDEES * scale))
    occurrences = max(2, round(OCCURRENCES * scale))
    client = get_redis()
    settings = {
        "SLUICE_KINDS": kinds(),
        "SLUICE_SCHEDULE": schedule_setting(horizon_days=HORIZON_DAYS),
        "SLUICE_QUEUES": {"critical": {"capacity": attendees * 4 + 1000, "wait_ms": 0}},
    }
    report = {"attendees": attendees, "occurrences": occurrences, "reminders": attendees * occurrences}
    users = bench_users("bench-schedule", attendees)
    with override_settings(**settings):
        for method in METHODS:
            reset_staging(client)
            client.config_resetstat()
            start = math.ceil(time.time()) + FIRST_IN_S
            old = occurrence_times(occurrences, start)
            new = [when + YEAR_S for when in old]
            schedule_all(users, old)
            staged = client.zcard(keys.scheduled_due("critical"))
            part = {"staged_before_the_move": staged}
            with measured(client, part):
                part["calls"] = move(method, users, new)
            reminders = attendees * occurrences
            part["per_reminder_us"] = round(part["wall_s"] / reminders * 1e6, 1)
            part["redis_commands_per_reminder"] = round(part["redis_commands"] / reminders, 2)
            part["db_queries_per_reminder"] = round(part["db_queries"] / reminders, 3)
            part.update(prove(client, users, old, new))
            report[method] = part
            if stdout:
                stdout.write(
                    f"  moved by {part['calls']:,} {method}() calls: {part['wall_s']} s, {part['redis_commands']:,} "
                    f"Redis commands, {part['redis_cpu_ms']} ms of Redis CPU, {part['db_queries']:,} queries; at the "
                    f"old times {part['published_at_old_times']} sent, at the new ones "
                    f"{part['reminders_sent_exactly_once']:,} exactly once ({part['reminders_missing']} missing, "
                    f"{part['reminders_doubled']} doubled)"
                )
    one, many = report["notify"], report["notify_many"]
    report["notify_many_vs_notify_wall"] = round(one["wall_s"] / many["wall_s"], 1) if many["wall_s"] else None
    report["holds"] = all(
        part["published_at_old_times"] == 0
        and part["reminders_sent_exactly_once"] == report["reminders"]
        and part["published_at_new_times"] == report["reminders"]
        and part["published_at_a_wrong_time"] == 0
        and part["rows_left"] == 0
        for part in (one, many)
    )
    return report
