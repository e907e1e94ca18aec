"""sluice_tools.redis_cluster: a real Redis Cluster of 3 primaries and 3 replicas on loopback; keys stay readable
through a reshard and through a failover of a primary whose writes its replica confirmed (WAIT)."""

import pytest
import redis
from redis.cluster import ClusterNode
from redis.cluster import RedisCluster as ClusterClient
from redis.crc import key_slot

from sluice_tools.redis_cluster import SLOTS, RedisCluster, cluster_support
from tests.conftest import need


@pytest.fixture(scope="module")
def cluster():
    reason = cluster_support()
    if reason:
        need(reason)
    cluster = RedisCluster().start()
    yield cluster
    cluster.stop()


@pytest.fixture(scope="module")
def slot_keys():
    """A key in every slot: {slot: key}."""
    keys, n = {}, 0
    while len(keys) < SLOTS:
        keys.setdefault(key_slot(f"k{n}".encode()), f"k{n}")
        n += 1
    return keys


def client_of(cluster):
    nodes = [ClusterNode("127.0.0.1", primary.port) for primary in cluster.primaries()]
    return ClusterClient(startup_nodes=nodes, decode_responses=True)


def owners(cluster):
    """The owner of every slot, as CLUSTER SHARDS says (another command than the tool's), and owner() agrees at
    each range's ends."""
    by_port = {node.port: node for node in cluster.nodes()}
    found = [None] * SLOTS
    with redis.Redis(port=cluster.nodes()[0].port, decode_responses=True) as client:
        for shard in client.execute_command("CLUSTER SHARDS"):
            (primary,) = (node["port"] for node in shard["nodes"] if node["role"] == "master")
            ranges = shard["slots"]
            for start, end in zip(ranges[::2], ranges[1::2], strict=True):
                found[start : end + 1] = [by_port[primary]] * (end - start + 1)
                assert cluster.owner(start) is cluster.owner(end) is by_port[primary]
    return found


def test_three_primaries_each_with_a_replica_in_sync_cover_every_slot(cluster):
    primaries = cluster.primaries()
    assert len(primaries) == 3
    assert len(cluster.nodes()) == 6
    for primary in primaries:
        (replica,) = cluster.replicas_of(primary)
        with replica.admin() as client:
            role = client.role()
            assert (role[0], role[2], role[3]) == (b"slave", primary.port, b"connected")
            assert client.info("replication")["master_link_status"] == "up"
    for node in cluster.nodes():
        with node.admin() as client:
            info = client.cluster("info")
            assert (info["cluster_state"], int(info["cluster_slots_ok"])) == ("ok", SLOTS)
    assert set(owners(cluster)) == set(primaries)
    assert cluster.url == "redis+cluster://" + ",".join(f"127.0.0.1:{p.port}" for p in primaries)


def test_a_key_written_through_a_cluster_client_is_readable(cluster):
    with client_of(cluster) as client:
        assert client.set("tool:key", "value")
        assert client.get("tool:key") == "value"
        assert cluster.owner(key_slot(b"tool:key")).port == client.get_node_from_key("tool:key").port


def test_reshard_moves_exactly_the_asked_slots_and_their_keys_stay_readable(cluster, slot_keys):
    source, target = cluster.primaries()[:2]
    before = owners(cluster)
    shard = [slot for slot in range(SLOTS) if before[slot] is source]
    with client_of(cluster) as client:
        for slot in shard:
            client.set(slot_keys[slot], f"v{slot}")
        cluster.reshard(source, target, 100)
        after = owners(cluster)
        moved = [slot for slot in range(SLOTS) if after[slot] is not before[slot]]
        assert len(moved) == 100
        assert all(before[slot] is source and after[slot] is target for slot in moved)
        assert all(cluster.owner(slot) is target for slot in moved)
        for slot in shard:
            assert client.get(slot_keys[slot]) == f"v{slot}"
    with target.admin() as direct:
        assert all(direct.get(slot_keys[slot]) == f"v{slot}".encode() for slot in moved)


def test_failover_makes_the_replica_the_owner_of_the_primary_slots_with_its_confirmed_writes(cluster, slot_keys):
    primary = cluster.primaries()[0]
    (replica,) = cluster.replicas_of(primary)
    before = owners(cluster)
    shard = [slot for slot in range(SLOTS) if before[slot] is primary]
    with primary.admin() as direct:
        # WAIT counts the replicas that have this connection's writes: one pipeline, one connection.
        pipe = direct.pipeline(transaction=False)
        for slot in shard:
            pipe.set(slot_keys[slot], f"f{slot}")
        pipe.execute_command("WAIT", 1, 1000)
        assert pipe.execute()[-1] == 1
    new = cluster.failover(primary)
    assert new is replica
    assert set(cluster.primaries()) == set(before) - {primary} | {new}
    assert cluster.replicas_of(new) == [primary]
    after = owners(cluster)
    assert all(after[slot] is new for slot in shard)
    assert [slot for slot in range(SLOTS) if after[slot] is not before[slot]] == shard
    with client_of(cluster) as client:
        assert all(client.get(slot_keys[slot]) == f"f{slot}" for slot in shard)
