"""A worker whose broker connection fails over to another sentinel of its list keeps Sluice's transport.

kombu's Connection.switch() takes the next URL's scheme as the transport: without Sluice's override, a worker that
moved to the second sentinel ran kombu's own Sentinel transport from then on (no reliable fetch, no heartbeat, no
reaper), and messages a dead batch consumer held stayed in its processing list until a worker restarted.
"""

from pipeline.broker.transport import SentinelTransport
from pipeline.celery import Connection, SluiceCeleryConfig

from .test_urls import SENTINELS


def test_switching_to_the_next_sentinel_keeps_sluices_transport(settings):
    settings.SLUICE_REDIS_URL = SENTINELS
    conf = dict(SluiceCeleryConfig())
    connection = Connection(
        conf["broker_url"], transport=conf["broker_transport"], transport_options=conf["broker_transport_options"]
    )
    seen = [(connection.hostname, connection.get_transport_cls())]
    for _ in range(3):  # round the list of three sentinels, back to the first
        connection.maybe_switch_next()
        seen.append((connection.hostname, connection.get_transport_cls()))
    assert [host for host, _cls in seen] == ["10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.1"]
    assert all(cls is SentinelTransport for _host, cls in seen), seen
    assert connection.as_uri().startswith("sentinel://")
