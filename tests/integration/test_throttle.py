"""The per-user throttle is exact across processes: at most ``max`` of a kind in any window, the rest folded."""

import time

from notifications import Outcome, notify
from pipeline.redis import keys

THROTTLED = {"task.comment": {"class": "routine", "channels": ["email"], "throttle": {"max": 5, "per_s": 60}}}


def test_the_window_slides(redis_client, user, settings):
    settings.SLUICE_KINDS = {"task.comment": {**THROTTLED["task.comment"], "throttle": {"max": 2, "per_s": 2}}}
    first = [notify(user, "task.comment", entity_id="t") for _ in range(3)]
    assert first == [Outcome.ACCEPTED, Outcome.ACCEPTED, Outcome.FOLDED]
    time.sleep(2.2)  # the first two leave the window: room for two more, not more
    second = [notify(user, "task.comment", entity_id="t") for _ in range(3)]
    assert second == [Outcome.ACCEPTED, Outcome.ACCEPTED, Outcome.FOLDED]
    assert redis_client.zcard(keys.throttle(user.pk, "task.comment")) == 2
    assert 0 < redis_client.ttl(keys.throttle(user.pk, "task.comment")) <= 3  # the log expires by itself
