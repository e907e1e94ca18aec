"""Redis URLs: parsing, the client each scheme gets, describe() without secrets, identity(), Celery's broker."""

import ssl

import pytest
import redis
from django.core.exceptions import ImproperlyConfigured

from pipeline.redis import addresses
from pipeline.redis.sentinel import FollowingSentinelPool

SENTINELS = "sentinel://:pw@10.0.0.1:26379;sentinel://:pw@10.0.0.2;sentinel://:pw@10.0.0.3:26380/2?master_name=main"


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("redis://127.0.0.1:6379/0", ("redis", (("127.0.0.1", 6379),), "", 0, None, None)),
        ("redis://cache.internal", ("redis", (("cache.internal", 6379),), "", 0, None, None)),
        ("redis://:p%40ss@h:7000/3", ("redis", (("h", 7000),), "", 3, None, "p@ss")),
        ("rediss://sluice:s3cret@h:6380/1", ("rediss", (("h", 6380),), "", 1, "sluice", "s3cret")),
        ("unix:///run/redis.sock?db=4", ("unix", (), "/run/redis.sock", 4, None, None)),
        (SENTINELS, ("sentinel", (("10.0.0.1", 26379), ("10.0.0.2", 26379), ("10.0.0.3", 26380)), "", 2, None, "pw")),
    ],
)
def test_parse(url, expected):
    parsed = addresses.parse(url)
    assert (parsed.scheme, parsed.hosts, parsed.path, parsed.db, parsed.username, parsed.password) == expected


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("http://h", "must be a redis://, rediss://, unix://, sentinel://, redis+cluster:// or rediss+cluster:// URL"),
        ("h:6379", "must be a redis://"),
        ("redis://h/x", "database number that is not a number"),
        ("redis://h:port", "not a valid URL"),
        ("redis://h?socket_timeout=3", "unknown option 'socket_timeout' for redis://"),
        ("rediss://h?ssl_cert_reqs=maybe", "ssl_cert_reqs='maybe'"),
        ("rediss://h?ssl_check_hostname=yes", "ssl_check_hostname='yes'"),
        ("rediss://h?master_name=x", "unknown option 'master_name' for rediss://"),
        ("sentinel://h:26379", "needs the master's name"),
        ("sentinel://h:1;redis://h:2?master_name=m", "mixes schemes"),
        ("sentinel://h:1/1;sentinel://h:2/2?master_name=m", "different databases"),
        ("sentinel://:a@h:1;sentinel://:b@h:2?master_name=m", "different credentials"),
        ("sentinel://h:1?master_name=a;sentinel://h:2?master_name=b", "'master_name' twice"),
        ("unix://", "needs the socket's path"),
    ],
)
def test_a_bad_url_names_the_setting_and_the_problem_and_hides_the_password(url, problem):
    with pytest.raises(ImproperlyConfigured, match="SLUICE_REDIS_URL") as found:
        addresses.parse(url, "SLUICE_REDIS_URL")
    assert problem in str(found.value)


def test_a_bad_url_error_never_shows_its_password():
    with pytest.raises(ImproperlyConfigured) as found:
        addresses.parse("redis://user:hunter2@h/x", "SLUICE_QUEUES['critical']['redis_url']")
    assert "hunter2" not in str(found.value)
    assert "SLUICE_QUEUES['critical']['redis_url']" in str(found.value)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("redis://:hunter2@h:6379/0", "redis://:***@h:6379/0"),
        ("rediss://sluice:hunter2@h/0?ssl_ca_certs=/ca.pem", "rediss://sluice:***@h/0?ssl_ca_certs=/ca.pem"),
        ("redis://h:6379/0", "redis://h:6379/0"),
        ("unix://:hunter2@/run/redis.sock?db=1", "unix://:***@/run/redis.sock?db=1"),
        (
            "sentinel://:hunter2@a:1;sentinel://:hunter2@b:2/0?master_name=m&sentinel_password=hunter3",
            "sentinel://:***@a:1;sentinel://:***@b:2/0?master_name=m&sentinel_password=***",
        ),
    ],
)
def test_describe_hides_passwords(url, shown):
    assert addresses.describe(url) == shown


def test_identity_is_the_server_and_database_not_the_spelling():
    same = ["redis://h:6379/0", "redis://:pw@H:6379", "rediss://user:pw@h/0?ssl_ca_certs=/ca.pem"]
    assert {addresses.identity(u) for u in same} == {("tcp", "h", 6379, 0)}
    assert addresses.identity("redis://h:6379/1") != addresses.identity("redis://h:6379/0")
    assert addresses.identity("redis://h:6380/0") != addresses.identity("redis://h:6379/0")
    assert addresses.identity("unix:///s.sock?db=2") == ("unix", "/s.sock", 2)
    one = "sentinel://a:1;sentinel://b:2/0?master_name=m"
    assert addresses.identity("sentinel://:pw@b:2;sentinel://a:1/0?master_name=m") == addresses.identity(one)
    assert addresses.identity(one) == ("sentinel", (("a", 1), ("b", 2)), "m", 0)
    # Another group's sentinels watching a master of the same name: another Redis.
    assert addresses.identity("sentinel://c:3/0?master_name=m") != addresses.identity(one)
    assert addresses.identity("sentinel://a:1;sentinel://b:2/0?master_name=n") != addresses.identity(one)


def test_clients_for_each_scheme_carry_their_timeouts_tls_and_credentials():
    plain = addresses.make_client("redis://:pw@h:6390/3").connection_pool.connection_kwargs
    assert (plain["host"], plain["port"], plain["db"], plain["password"]) == ("h", 6390, 3, "pw")
    assert (plain["socket_connect_timeout"], plain["socket_timeout"]) == (2, 5)

    tls = addresses.make_client("rediss://u:pw@h/0?ssl_ca_certs=/ca.pem", socket_timeout=1)
    kwargs = tls.connection_pool.connection_kwargs
    assert tls.connection_pool.connection_class is redis.SSLConnection
    assert kwargs["ssl_cert_reqs"] == ssl.CERT_REQUIRED  # verified unless the URL says otherwise
    assert (kwargs["ssl_ca_certs"], kwargs["username"], kwargs["socket_timeout"]) == ("/ca.pem", "u", 1)
    assert addresses.parse("rediss://h/0?ssl_cert_reqs=CERT_OPTIONAL").options["ssl_cert_reqs"] == "optional"
    relaxed = addresses.make_client("rediss://h/0?ssl_cert_reqs=none&ssl_check_hostname=false")
    assert relaxed.connection_pool.connection_kwargs["ssl_cert_reqs"] == ssl.CERT_NONE
    assert relaxed.connection_pool.connection_kwargs["ssl_check_hostname"] is False

    unix = addresses.make_client("unix:///run/r.sock?db=2").connection_pool
    assert unix.connection_class is redis.UnixDomainSocketConnection
    assert (unix.connection_kwargs["path"], unix.connection_kwargs["db"]) == ("/run/r.sock", 2)

    master = addresses.make_client(SENTINELS + "&sentinel_password=spw")
    pool = master.connection_pool
    assert isinstance(pool, FollowingSentinelPool)
    assert (pool.service_name, pool.connection_kwargs["db"], pool.connection_kwargs["password"]) == ("main", 2, "pw")
    manager = pool.sentinel_manager
    hosts = [s.connection_pool.connection_kwargs for s in manager.sentinels]
    assert [(k["host"], k["port"]) for k in hosts] == [("10.0.0.1", 26379), ("10.0.0.2", 26379), ("10.0.0.3", 26380)]
    assert {k.get("password") for k in hosts} == {"spw"}  # the sentinels' own password, not the master's


def test_celery_broker_settings_in_kombus_spelling():
    plain = addresses.celery_broker("redis://:pw@h:6379/0")
    assert plain == {
        "broker_url": "redis://:pw@h:6379/0",
        "broker_transport": "pipeline.broker.transport:Transport",
        "broker_transport_options": {},
        "broker_use_ssl": False,
    }
    tls = addresses.celery_broker("rediss://u:pw@h:6380/1?ssl_ca_certs=/ca.pem")
    assert tls["broker_url"] == "rediss://u:pw@h:6380/1"
    assert tls["broker_use_ssl"] == {"ssl_cert_reqs": ssl.CERT_REQUIRED, "ssl_ca_certs": "/ca.pem"}
    sentinel = addresses.celery_broker(SENTINELS + "&sentinel_password=spw")
    assert sentinel["broker_url"] == (
        "sentinel://:pw@10.0.0.1:26379/2;sentinel://:pw@10.0.0.2:26379/2;sentinel://:pw@10.0.0.3:26380/2"
    )
    assert sentinel["broker_transport"] == "pipeline.broker.transport:SentinelTransport"
    assert sentinel["broker_transport_options"] == {
        "master_name": "main",
        "sentinel_kwargs": {"password": "spw", "username": None},
    }


def test_the_celery_app_takes_its_broker_from_sluice_redis_url(settings):
    from pipeline.celery import SluiceCeleryConfig

    settings.SLUICE_REDIS_URL = SENTINELS
    settings.SLUICE_CELERY = {"broker_transport_options": {"visibility_timeout": 600}}
    conf = dict(SluiceCeleryConfig())
    assert conf["broker_transport"] == "pipeline.broker.transport:SentinelTransport"
    assert conf["broker_url"].startswith("sentinel://:pw@10.0.0.1:26379/2;")
    options = conf["broker_transport_options"]
    assert (options["master_name"], options["visibility_timeout"], options["fetch_dead_after_s"]) == ("main", 600, 60)


def test_sluice_celery_cannot_set_broker_use_ssl(settings):
    from pipeline.conf import celery_overrides

    settings.SLUICE_CELERY = {"broker_use_ssl": {"ssl_cert_reqs": ssl.CERT_NONE}}
    with pytest.raises(ImproperlyConfigured, match=r"SLUICE_CELERY\['broker_use_ssl'\] cannot be changed"):
        celery_overrides()


@pytest.mark.parametrize(
    "url", ["redis://h/0", "rediss://h/0", "unix:///run/r.sock", "sentinel://h:26379/0?master_name=m"]
)
def test_no_client_retries_a_failed_command_by_itself(url):
    """A producer gets Unavailable at once during an outage, never after a hidden backoff (redis.Redis(host=...)
    alone would retry ten times, for up to ten seconds each)."""
    client = addresses.make_client(url)
    assert client.connection_pool.make_connection().retry._retries == 0
    if url.startswith("sentinel"):
        assert all(
            s.connection_pool.make_connection().retry._retries == 0
            for s in client.connection_pool.sentinel_manager.sentinels
        )


def test_a_publish_to_another_redis_carries_none_of_criticals_sentinel_options():
    """The app's broker (critical's) is a Sentinel with a password: a task published to another class's Redis
    is sent with that Redis's own options only, never critical's master name or sentinel credentials."""
    from pipeline.celery import _connection_for, app

    critical = addresses.celery_broker(
        "sentinel://s1:26379/0?master_name=critical-primary&sentinel_password=critical-only"
    )
    previous = app.conf.broker_transport_options
    app.conf.update(broker_transport_options={**previous, **critical["broker_transport_options"]})
    try:
        plain = _connection_for(app, "redis://routine-redis:6379/0").transport_options
        other = _connection_for(app, "sentinel://t1:26379/0?master_name=routine-primary").transport_options
    finally:
        app.conf.update(broker_transport_options=previous)
    assert plain.get("master_name") is None
    assert plain.get("sentinel_kwargs") is None
    assert other["master_name"] == "routine-primary"
    assert other.get("sentinel_kwargs") is None
