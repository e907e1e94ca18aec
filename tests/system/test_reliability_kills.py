"""Worker process groups kill -9ed at random instants and inside fetches while events keep arriving: nothing
accepted is lost, and a duplicate only comes from a kill after the provider returned (bench kills, shortened)."""

import io

import pytest

from sluice_tools.bench import kills

# A few kills show the property; `manage.py bench kills` runs the long loop (200 kills, docs/reliability.md).
KILLS = 5


@pytest.mark.django_db
@pytest.mark.timeout(420)
# A killed prefork child's parent is killed with it; what the replacements log about the dead is expected.
@pytest.mark.expected_errors("exited with .signal 9", "WorkerLostError")
def test_kills_under_load_lose_nothing(redis_server, redis_client):
    result = kills.run(redis_server.url, KILLS, seed=3, stdout=io.StringIO())
    assert result["kills"] == KILLS
    # Events kept arriving through the kills (how many depends on the machine's speed: a figure for bench kills).
    assert result["events_accepted"] > KILLS
    assert result["lost"] == 0, result["lost_entities"]
    assert result["duplicated_unexplained"] == {}
    assert result["drained"]
