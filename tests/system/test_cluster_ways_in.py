"""Every way into a class on a real Redis Cluster: notify_many split by partition (one round trip per partition it
touches), scheduled sends moved on time into their users' partitions, idempotency keys replayed in the user's
partition, and a dead letter replayed into its user's partition."""

import time
from collections import Counter

import pytest

from notifications import Outcome, notify, notify_many
from notifications.scheduling import mover
from pipeline.broker import deadletters
from pipeline.conf import sluice_settings
from pipeline.connections import get_redis, reset
from pipeline.redis.cluster import partition_of
from tests.cluster_helpers import cluster, use_cluster  # noqa: F401  (the module's cluster)

CRITICAL = "meeting.reminder"
PARTITIONS = 6

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]


@pytest.fixture
def on_cluster(settings, cluster, redis_server):
    use_cluster(
        settings,
        cluster,
        redis_server.url,
        {
            "critical": {"capacity": 600, "redis_url": cluster.url, "partitions": PARTITIONS},
            "routine": {"capacity": 100, "redis_url": redis_server.url},
            "background": {"capacity": 100, "redis_url": redis_server.url},
        },
    )
    yield cluster
    reset()


def depths():
    whole = sluice_settings().queues["critical"]
    client = get_redis(whole.redis_url)
    return [client.llen(part.name) for part in whole.every_partition]


def scripts_run(cluster):
    """EVALSHA calls so far, summed over the primaries (INFO commandstats)."""
    total = 0
    for node in cluster.primaries():
        stats = node.admin().info("commandstats")
        total += stats.get("cmdstat_evalsha", {}).get("calls", 0)
    return total


def test_notify_many_takes_one_round_trip_per_partition_it_touches(on_cluster, make_users):
    users = make_users(60)
    # Once first, so every primary has the script loaded (a first EVALSHA there is refused, NOSCRIPT, and sent again).
    notify_many(users, CRITICAL, entity_id="m0", payload={})
    for node in on_cluster.primaries():
        node.admin().flushall()
    before = scripts_run(on_cluster)
    result = notify_many(users, CRITICAL, entity_id="m1", payload={"title": "Moved"})
    assert result.counts[Outcome.ACCEPTED] == 60
    touched = {partition_of(user.pk, PARTITIONS) for user in users}
    assert scripts_run(on_cluster) - before == len(touched)
    expected = Counter(partition_of(user.pk, PARTITIONS) for user in users)
    assert depths() == [expected[index] for index in range(PARTITIONS)]
    # The same call again with an idempotency key per user: each replayed in its own user's partition.
    keyed = notify_many(users, CRITICAL, entity_id="m2", payload={}, idempotency_key="move-1")
    again = notify_many(users, CRITICAL, entity_id="m2", payload={}, idempotency_key="move-1")
    assert keyed.counts[Outcome.ACCEPTED] == 60
    assert again.replayed == 60
    assert sum(depths()) == 120


def test_scheduled_sends_go_to_their_users_partitions_on_time(on_cluster, make_users):
    users = make_users(30)
    when = time.time() + 30
    for user in users:
        assert notify(user, CRITICAL, entity_id="r1", payload={}, send_at=when, key="10m") == Outcome.SCHEDULED
    assert sum(depths()) == 0
    assert mover.drain("critical", now=when - 1)["published"] == 0
    assert mover.drain("critical", now=when + 0.1)["published"] == 30
    expected = Counter(partition_of(user.pk, PARTITIONS) for user in users)
    assert depths() == [expected[index] for index in range(PARTITIONS)]


def test_a_dead_letter_is_kept_and_replayed_in_its_users_partition(on_cluster, user):
    kwargs = {"user_id": user.pk, "kind": CRITICAL, "entity_id": "m9", "notification_id": "n-9", "payload": {}}
    letter = deadletters.add("sluice.send.critical", "critical", kwargs, "permanent", "rejected by the provider", 1)
    [found] = deadletters.entries()
    assert found.id == letter.id
    assert deadletters.replay(found) == deadletters.REPLAYED
    index = partition_of(user.pk, PARTITIONS)
    assert depths() == [1 if i == index else 0 for i in range(PARTITIONS)]
    assert deadletters.size() == 0


def test_the_activity_drain_stores_every_partitions_entries_once(on_cluster, make_users, settings):
    from notifications.activity.models import ActivityEntry
    from notifications.activity.tasks import drain

    settings.SLUICE_ACTIVITY = {"enabled": True}
    reset()
    users = make_users(40)
    for user in users:
        notify(user, CRITICAL, entity_id="a1", payload={})
    assert drain() == 40
    # Stream ids repeat across partitions (each is a stream of its own): every entry is still stored, once.
    assert ActivityEntry.objects.filter(entity_id="a1").count() == 40
    assert drain() == 0
