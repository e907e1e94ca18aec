"""Issue 29, item 5: a flusher killed after claiming holds no more keys of a class than that class's queue had room
for, and its claim is taken over once, when its lease ends."""

import json
import os
import signal
import subprocess
import sys
import textwrap
from collections import Counter

import pytest

from digest.flush import run_flush
from pipeline.redis import keys
from sluice_tools.processes import ROOT
from tests.digest_helpers import fold, published
from tests.waiting import wait_for

pytestmark = pytest.mark.django_db  # the flush rebuilds the preferences' mirror from the database

QUEUES = {"routine": {"capacity": 50}, "background": {"capacity": 50}}
ROUTINE_ROOM, BACKGROUND_ROOM = 4, 7
KIND_CLASS = {"task.comment": "routine", "board.updated": "background"}

# A flusher that dies (SIGKILL) as soon as its first claim is held, before publishing any of it.
FLUSHER = textwrap.dedent(
    """
    import os, signal, django
    django.setup()
    from digest import flush, user_claims

    real = user_claims.claim_users

    def claim_then_die(*args, **kwargs):
        real(*args, **kwargs)
        os.kill(os.getpid(), signal.SIGKILL)

    user_claims.claim_users = claim_then_die
    flush.run_flush("test", lease_s=1)
    """
)


def fillers(n):
    return [json.dumps({"filler": i}) for i in range(n)]


@pytest.mark.timeout(30)
def test_a_killed_flusher_holds_no_more_than_each_class_had_room_for(redis_client, redis_server, settings):
    settings.SLUICE_QUEUES = QUEUES
    redis_client.lpush("routine", *fillers(50 - ROUTINE_ROOM))
    redis_client.lpush("background", *fillers(50 - BACKGROUND_ROOM))
    for user in range(40):
        fold(user, kind="task.comment", entity_id="a")
        fold(user, kind="task.comment", entity_id="b")
        fold(user, kind="board.updated", entity_id="c")
    env = {
        **os.environ,
        "REDIS_URL": redis_server.url,
        "DJANGO_SETTINGS_MODULE": "settings",
        "SLUICE_QUEUES": json.dumps(QUEUES),
    }
    done = subprocess.run([sys.executable, "-c", FLUSHER], cwd=ROOT, env=env, capture_output=True, timeout=30)
    assert done.returncode == -signal.SIGKILL, done.stderr.decode()[-2000:]

    (flush_id,) = [f.decode() for f in redis_client.zrange(keys.claims(), 0, -1)]
    held = Counter(KIND_CLASS[json.loads(m)[1]] for m in redis_client.smembers(keys.claim_set(flush_id)))
    # Two routine keys a user, claimed whole: two users' (4 keys) fit routine's room of 4; background's 7 users.
    assert held == {"routine": ROUTINE_ROOM, "background": BACKGROUND_ROOM}

    # Room frees; once the dead flusher's lease ends its claim is taken over, and every key goes out once.
    for queue in ("routine", "background"):
        for filler in fillers(50):
            redis_client.lrem(queue, 0, filler)
    settings.SLUICE_QUEUES = {"routine": {"capacity": 1000}, "background": {"capacity": 1000}}
    wait_for(
        lambda: (
            run_flush("test") is not None
            and redis_client.zcard(keys.claims()) == 0
            and redis_client.zcard(keys.pending()) == 0
        ),
        timeout=15,
        what="the dead flusher's claim taken over and every key published",
    )
    routine, background = published(redis_client, "routine"), published(redis_client, "background")
    assert sorted(m["user_id"] for m in routine) == list(range(40))  # one digest per user
    assert all(len(m["digest"]["items"]) == 2 for m in routine)
    assert sorted(m["user_id"] for m in background) == list(range(40))
