"""A class on a TLS-only Redis Cluster, as a managed one is: `rediss+cluster://` with the certificate verified, and the
documented ACL user (docs/scaling.md, "A class on a Redis Cluster").

Every node speaks only TLS (to clients, to its replica and on the cluster bus) and asks every client for a certificate
its CA signed, so each connection Sluice makes (notify(), the worker's fetch on each partition's primary, its acks,
Celery's events and remote control over pub/sub) must carry the URL's TLS options, or it is refused. A worker sends
every accepted event and the nodes' ACL LOG stays empty; a URL that trusts another CA gets Unavailable, nothing queued.
"""

import json
from urllib.parse import quote

import pytest
from django.contrib.auth import get_user_model

from notifications import Outcome, Unavailable, notify
from pipeline.connections import get_redis, reset
from sluice_tools.bench.provider import SENT_KEY
from sluice_tools.processes import WorkerProcess
from sluice_tools.redis_cluster import TLS, RedisCluster, cluster_support
from tests.cluster_helpers import acl_log, add_acl_user, use_cluster
from tests.conftest import need
from tests.integration.test_per_class_redis import CHANNELS, KINDS
from tests.redis_topologies import make_certificates, tls_support
from tests.waiting import wait_for

PASSWORD = "s3cret/with:odd@chars"
USERS = 30


@pytest.fixture(scope="module")
def tls_cluster(tmp_path_factory):
    """3 primaries and 3 replicas speaking only TLS."""
    reason = cluster_support() or tls_support()
    if reason:
        need(reason)
    certs = make_certificates(tmp_path_factory.mktemp("certs"))
    started = RedisCluster(tls=TLS(ca=certs / "ca.crt", cert=certs / "server.crt", key=certs / "server.key")).start()
    yield started
    started.stop()


def user_url(cluster, url=None):
    """The cluster's URL (or ``url``) with the ACL user's credentials."""
    return (url or cluster.url).replace("rediss+cluster://", f"rediss+cluster://sluice:{quote(PASSWORD, safe='')}@")


def use(settings, cluster, plain_url, critical_url):
    """The documented ACL user on every node, its ACL LOG empty; the cluster and the plain Redis emptied; critical on
    ``critical_url`` (3 partitions), routine and background on the plain Redis. Returns the queues' settings."""
    add_acl_user(cluster, PASSWORD)
    queues = {
        "critical": {"capacity": 60, "redis_url": critical_url, "partitions": 3},
        "routine": {"redis_url": plain_url},
        "background": {"redis_url": plain_url},
    }
    use_cluster(settings, cluster, plain_url, queues)
    return queues


def keys_on(cluster):
    """How many keys each primary holds."""
    found = {}
    for node in cluster.primaries():
        with node.admin() as client:
            found[node.port] = client.dbsize()
    return found


@pytest.mark.timeout(180)
def test_a_worker_sends_every_event_of_a_class_on_a_tls_cluster_as_the_acl_user(tls_cluster, redis_server, settings):
    queues = use(settings, tls_cluster, redis_server.url, user_url(tls_cluster))
    env = {"SLUICE_KINDS": json.dumps(KINDS), "SLUICE_QUEUES": json.dumps(queues)}
    plain = get_redis(redis_server.url)
    worker = WorkerProcess("critical", redis_server.url, CHANNELS, env=env).start()
    try:
        outcomes = [
            notify(get_user_model()(pk=pk), "meeting.reminder", entity_id=f"tls-{pk}", payload={})
            for pk in range(1, USERS + 1)
        ]
        assert outcomes == [Outcome.ACCEPTED] * USERS
        wait_for(lambda: plain.llen(SENT_KEY) >= USERS, 60, what=lambda: f"{plain.llen(SENT_KEY)} of {USERS} sends")
    finally:
        worker.stop()
        reset()
    sent = [json.loads(raw) for raw in plain.lrange(SENT_KEY, 0, -1)]
    assert sorted(record["user"] for record in sent) == list(range(1, USERS + 1))
    assert {record["class"] for record in sent} == {"critical"}
    assert not worker.problems(), worker.problems()
    refused = acl_log(tls_cluster)
    assert refused == [], refused[:3]


@pytest.mark.timeout(60)
def test_a_url_trusting_another_ca_gets_unavailable_and_nothing_is_queued(tls_cluster, redis_server, settings):
    good = user_url(tls_cluster)
    rogue = good.replace("ca.crt", "rogue-ca.crt")
    assert rogue != good
    use(settings, tls_cluster, redis_server.url, rogue)
    try:
        with pytest.raises(Unavailable, match="CERTIFICATE_VERIFY_FAILED") as found:
            notify(get_user_model()(pk=1), "meeting.reminder", entity_id="rogue", payload={})
        assert PASSWORD not in str(found.value)
        assert quote(PASSWORD, safe="") not in str(found.value)
        assert set(keys_on(tls_cluster).values()) == {0}, keys_on(tls_cluster)
        # The same URL trusting the nodes' own CA is accepted: it was the certificate that was refused.
        use(settings, tls_cluster, redis_server.url, good)
        assert notify(get_user_model()(pk=1), "meeting.reminder", entity_id="rogue", payload={}) == Outcome.ACCEPTED
    finally:
        reset()
