"""What bench schedule's parts share: the reminder kind and its settings, bench users, and reading the queue."""

import base64
import json

from django.contrib.auth import get_user_model

from notifications.scheduling.models import ScheduledSend
from pipeline.broker.queues import queue_for_class
from pipeline.conf import queue_lists
from sluice_tools.demo_kinds import DEMO_KINDS

KIND = "meeting.reminder"
KEY = "10m"
# The incident's pool: 55 sends a second, of which 0.8 is reservable by scheduled sends (44 a second).
RATE_PER_S = 55
RESERVABLE = 0.8
# A meeting reminder may go up to two minutes early: 180 attendees' reminders fit in a few seconds of the rate.
WINDOW_S = 120


def kinds(window_s=WINDOW_S, channels=("push",)):
    """The demo's kinds, one channel each (one send is one message), the reminder with its schedule window."""
    found = {name: {**kind, "channels": list(channels)} for name, kind in DEMO_KINDS.items()}
    found[KIND] = {**found[KIND], "schedule_window_s": window_s}
    return found


def schedule_setting(rate_per_s=RATE_PER_S, reservable=RESERVABLE, **extra):
    return {"critical": {"rate_per_s": rate_per_s, "reservable": reservable}, **extra}


def bench_users(prefix, count):
    """``count`` users named ``prefix``-n in the database (made once, kept for the next run), none with a pending
    scheduled send."""
    User = get_user_model()
    names = [f"{prefix}-{n}" for n in range(count)]
    have = set(User.objects.filter(username__in=names).values_list("username", flat=True))
    User.objects.bulk_create([User(username=name) for name in names if name not in have], batch_size=1000)
    users = list(User.objects.filter(username__in=names).order_by("pk"))
    ScheduledSend.objects.filter(user__in=users).delete()
    return users


def take_published(client, klass="critical"):
    """The send-task kwargs of every message waiting in ``klass``'s queue, which is emptied: the mover's output."""
    found = []
    for name in queue_lists(queue_for_class(klass)):
        raws = client.lrange(name, 0, -1)
        if raws:
            client.delete(name)
        found.extend(json.loads(base64.b64decode(json.loads(raw)["body"]))[1] for raw in reversed(raws))
    return found


def quantiles(values):
    """p50, p99 and max of ``values`` (seconds), rounded to the millisecond; None each for no values."""
    from .common import percentile

    if not values:
        return {"p50_s": None, "p99_s": None, "max_s": None}
    return {
        "p50_s": round(percentile(values, 50), 3),
        "p99_s": round(percentile(values, 99), 3),
        "max_s": round(max(values), 3),
    }
