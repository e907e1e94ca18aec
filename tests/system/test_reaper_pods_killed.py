"""20 worker pods of routine and background, busy with batches, kill -9ed at once while events keep arriving: every
message they held is back in its queue within the reaper's documented bound, and every accepted event is sent once
(`manage.py bench kills --at-once --pods 20 --runs 5` is the long loop, docs/reliability.md)."""

import io

import pytest

from sluice_tools.bench import kills_at_once

PODS = 20


@pytest.mark.django_db
@pytest.mark.timeout(600)
def test_twenty_pods_killed_at_once_give_back_everything_within_the_bound(redis_server, redis_client):
    out = io.StringIO()
    result = kills_at_once.run(redis_server.url, PODS, seed=5, stdout=out)
    print(out.getvalue(), {k: v for k, v in result.items() if k != "back_s"})
    assert result["pods_killed"] == PODS
    # Busy with batches: most pods' batches held messages when they died.
    assert result["batch_consumers_holding_at_kill"] >= PODS // 2
    assert result["not_back"] == []
    assert result["slowest_back_s"] <= result["bound_s"]
    assert result["lost"] == 0, result["lost_entities"]
    # A resend only from a send the kill cut after the provider returned and before "sent" was written.
    assert result["duplicated_unexplained"] == {}
    assert result["drained"]
