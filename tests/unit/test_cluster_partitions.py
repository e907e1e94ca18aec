"""A class on a Redis Cluster: its URL, its partitions' tags and shares, and the key rules of a partition's client."""

import pytest
from django.core.exceptions import ImproperlyConfigured
from redis.crc import key_slot

from pipeline.conf import sluice_settings
from pipeline.redis import addresses, cluster

CLUSTER = "redis+cluster://sluice:pw@10.0.0.1:7000,10.0.0.2:7001,10.0.0.3"


def test_a_cluster_url_names_its_seeds_credentials_and_tls():
    parsed = addresses.parse(CLUSTER)
    assert parsed.cluster
    assert parsed.hosts == (("10.0.0.1", 7000), ("10.0.0.2", 7001), ("10.0.0.3", 6379))
    assert (parsed.username, parsed.password) == ("sluice", "pw")
    assert addresses.describe(CLUSTER) == "redis+cluster://sluice:***@10.0.0.1:7000,10.0.0.2:7001,10.0.0.3"
    tls = addresses.parse("rediss+cluster://h1:7000,h2:7000?ssl_cert_reqs=none")
    assert tls.tls
    assert addresses.ssl_options(tls)["ssl_cert_reqs"] == 0
    # The same seeds in another order: the same cluster.
    assert addresses.identity("redis+cluster://10.0.0.2:7001,10.0.0.1:7000") == addresses.identity(
        "redis+cluster://10.0.0.1:7000,10.0.0.2:7001"
    )


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("redis+cluster://h1:7000,,h2:7000", "empty seed node"),
        ("redis+cluster://h1:7000/2", "only database 0"),
        ("redis+cluster://h1:7000?db=1", "unknown option 'db'"),
        ("redis+cluster://h1:7000?ssl_cert_reqs=none", "unknown option 'ssl_cert_reqs'"),
    ],
)
def test_a_bad_cluster_url_says_what_is_wrong(url, problem):
    with pytest.raises(ImproperlyConfigured, match=problem):
        addresses.parse(url)


def test_the_broker_of_a_cluster_keeps_its_secret_out_of_the_transport_options():
    found = addresses.celery_broker(CLUSTER)
    assert found["broker_transport"] == "pipeline.broker.cluster_transport:ClusterTransport"
    assert found["broker_url"] == "redis://sluice:pw@10.0.0.1:7000/0"
    assert found["broker_transport_options"] == {"cluster_seeds": ["10.0.0.1:7000", "10.0.0.2:7001", "10.0.0.3:6379"]}


@pytest.mark.parametrize("partitions", [1, 3, 6, 12, 64])
def test_partition_tags_fall_in_even_shares_of_the_slots(partitions):
    slots = [key_slot(cluster.partition_tag("critical", p, partitions).encode()) for p in range(partitions)]
    for index, slot in enumerate(slots):
        assert index * 16384 // partitions <= slot < (index + 1) * 16384 // partitions
    assert len({cluster.partition_tag("routine", p, partitions) for p in range(partitions)}) == partitions


def test_shares_of_a_capacity_differ_by_one_at_most_and_sum_to_it():
    for total, partitions in [(600, 6), (601, 6), (7, 12), (2048, 12)]:
        shares = [cluster.share(total, p, partitions) for p in range(partitions)]
        assert sum(shares) == total
        assert max(shares) - min(shares) <= 1


def test_a_user_belongs_to_one_stable_partition():
    assert [cluster.partition_of(user, 12) for user in (1, 2, 3, "a-uuid")] == [
        cluster.partition_of(user, 12) for user in ("1", "2", "3", "a-uuid")
    ]
    spread = {cluster.partition_of(user, 12) for user in range(1000)}
    assert spread == set(range(12))
    assert cluster.partition_of(42, 1) == 0


def test_every_command_sluice_runs_has_a_key_rule_on_a_partition():
    tag = "{critical.0.4}"
    for command in addresses.ACL_COMMANDS:
        name = command.replace("|", " ").upper()
        args = (name, "sluice:k", "sluice:v", "x")
        if name in ("EVAL", "EVALSHA"):
            args = (name, "body", 2, "sluice:a", "sluice:b", "arg")
        found = cluster.with_tag(tag, args)  # never "no key rule"
        if name.split()[0].lower() in cluster.NO_KEYS:
            assert found == args
        else:
            assert tag + "sluice:" in "".join(map(str, found)), (name, found)
    assert cluster.with_tag(tag, ("LMOVE", "a", tag + "b", "LEFT", "RIGHT")) == (
        "LMOVE",
        tag + "a",
        tag + "b",
        "LEFT",
        "RIGHT",
    )
    assert cluster.with_tag(tag, ("EVALSHA", "sha", 1, "k", "v")) == ("EVALSHA", "sha", 1, tag + "k", "v")
    assert cluster.with_tag(tag, ("XINFO STREAM", "s")) == ("XINFO STREAM", tag + "s")
    with pytest.raises(ValueError, match="no key rule"):
        cluster.with_tag(tag, ("SUNIONSTORE", "a", "b"))


def test_a_partitioned_class_splits_its_bounds(settings):
    settings.SLUICE_QUEUES = {"critical": {"capacity": 100, "ceiling": 200, "redis_url": CLUSTER, "partitions": 6}}
    queue = sluice_settings().queues["critical"]
    parts = queue.every_partition
    assert [p.capacity for p in parts] == [17, 17, 17, 17, 16, 16]
    assert sum(p.ceiling for p in parts) == 200
    assert all(p.name == p.tag + "critical" for p in parts)
    assert queue.published_to == parts[0].name
    assert len(queue.queue_names) == 6


@pytest.mark.parametrize(
    ("queues", "digest", "problem"),
    [
        ({"critical": {"partitions": 4}}, {}, r"\['partitions'\] needs a Redis Cluster"),
        ({"critical": {"redis_url": CLUSTER, "capacity": 4, "partitions": 8}}, {}, "at most its capacity"),
        ({"critical": {"redis_url": CLUSTER, "partitions": 0}}, {}, "partitions"),
        ({"routine": {"redis_url": CLUSTER}}, {}, "SLUICE_DIGEST\\['redis_url'\\]"),
        ({}, {"redis_url": CLUSTER}, "not a Redis Cluster"),
    ],
)
def test_bad_cluster_settings_name_the_key(settings, queues, digest, problem):
    settings.SLUICE_QUEUES = queues
    settings.SLUICE_DIGEST = digest
    with pytest.raises(ImproperlyConfigured, match=problem):
        sluice_settings()


def test_the_shared_redis_must_be_one_redis(settings):
    settings.SLUICE_REDIS_URL = CLUSTER
    with pytest.raises(ImproperlyConfigured, match="SLUICE_REDIS_URL must name one Redis"):
        sluice_settings()
