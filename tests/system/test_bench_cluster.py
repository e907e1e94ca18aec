"""bench admission --cluster and bench cluster, tiny: their reports have the figures the docs quote, a critical
notify() is one round trip on the cluster as on one Redis, and every primary carries part of the load."""

import io

import pytest

from sluice_tools.bench import admission_cluster, cluster_cost
from sluice_tools.redis_cluster import cluster_support
from tests.conftest import need


@pytest.fixture(autouse=True)
def cluster_possible():
    reason = cluster_support()
    if reason:
        need(reason)


@pytest.mark.timeout(120)
def test_admission_on_the_cluster_is_one_round_trip(redis_client):
    result = admission_cluster.run(calls=200, rounds=1, replicas=0)
    assert result["round_trips_per_notify"] == {"one_redis": 1.0, "cluster": 1.0, "cluster_one_primary": 1.0}
    assert result["scripts_per_notify"] == {"one_redis": 1.0, "cluster": 1.0}
    # The same script's commands on a primary as on one Redis, and nothing on the bench's own Redis.
    assert result["redis_commands_per_notify"]["cluster"] == result["redis_commands_per_notify"]["one_redis"]
    assert result["bench_redis_commands_per_cluster_notify"] == {}
    assert result["cluster_vs_one_redis_wall"] > 0
    assert result["cluster_vs_one_redis_cpu"] > 0
    assert set(result["producer_cpu_us_per_call"]) == {"one_redis", "cluster", "cluster_one_primary"}


@pytest.mark.django_db
@pytest.mark.timeout(240)
def test_cluster_cost_reports_each_primarys_share(redis_client, redis_server):
    result = cluster_cost.run(redis_server.url, events=120, rounds=1, stdout=io.StringIO(), replicas=0)
    shards = result["cluster"]["by_shard"]
    assert len(shards) == 3
    assert sum(row["notifications_share"] for row in shards.values()) == pytest.approx(1, abs=0.01)
    for row in shards.values():
        assert row["notifications_share"] > 0.1  # many users: every primary's partitions are used
        assert row["commands_share"] > 0
        assert row["redis_cpu_share"] > 0
        assert row["notifications_per_s_per_core"] > 0
    assert result["one_redis"]["by_shard"]["redis"]["notifications_share"] == 1
    assert result["cluster"]["commands_per_notification"] > 0
    assert result["notifications_per_s_per_core"]["cluster_all_shards"] > 0
    assert "worst_share_deviation" in result
    assert "extrapolated" in result
