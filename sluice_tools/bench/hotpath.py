"""bench cost, profile: where a send task's own CPU time goes (cProfile of the task run in this process)."""

import cProfile
import pstats
import time
import uuid

from notifications.delivery.tasks import send_tasks


def run(kind, klass="critical", calls=1000, top=12):
    """Run ``klass``'s send task ``calls`` times in process (Celery's apply: the task's body and its tracer, not
    the consumer loop) and return the functions with the most own time. A critical send is a single send, a
    batch of one: what the worker's own cost is measured on."""
    task = send_tasks[klass]
    kwargs = {"kind": kind, "user_id": 1, "entity_id": "e", "payload": {"title": "x"}}
    task.apply(kwargs={**kwargs, "notification_id": uuid.uuid4().hex})  # warm: templates, scripts, settings
    # Timed by this process's CPU, not the wall clock: on a shared machine the wall clock mostly measures the
    # time waiting for Redis and for a core, which is not the task's own cost.
    profiler = cProfile.Profile(time.process_time)
    profiler.enable()
    for _ in range(calls):
        task.apply(kwargs={**kwargs, "notification_id": uuid.uuid4().hex})
    profiler.disable()
    stats = pstats.Stats(profiler)
    total = stats.total_tt
    rows = sorted(stats.stats.items(), key=lambda item: item[1][2], reverse=True)[:top]
    cumulative = sorted(stats.stats.items(), key=lambda item: item[1][3], reverse=True)
    wanted = ("run", "send_item", "gated_claim", "hold", "record_end", "finish_send", "render", "messages_of", "send")
    return {
        "class": klass,
        "calls": calls,
        "us_per_task": round(total / calls * 1e6, 1),
        "own_time_top": [
            {"function": f"{path.rsplit('/', 2)[-2:][-1]}:{line} {name}", "share": round(tt / total, 3)}
            for (path, line, name), (_cc, _nc, tt, _ct, _callers) in rows
        ],
        "cumulative_us_per_task": {
            f"{path.rsplit('/', 1)[-1]}:{name}": round(ct / calls * 1e6, 1)
            for (path, _line, name), (_cc, _nc, _tt, ct, _callers) in cumulative
            if name in wanted and ("notifications" in path or "pipeline" in path)
        },
    }
