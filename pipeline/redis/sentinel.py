"""A Sentinel master pool that notices a failover within a second, not only when a connection breaks."""

import time

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.sentinel import MasterNotFoundError, SentinelConnectionPool

#: How often a process asks the sentinels where the master is, at most, when it takes a pooled connection.
RECHECK_S = 1.0


class FollowingSentinelPool(SentinelConnectionPool):
    """redis-py's pool asks the sentinels for the master only when it opens a connection. After a SENTINEL
    FAILOVER the old primary keeps answering until the sentinels demote it (up to about ten seconds), so a process
    whose pooled connections stay open keeps writing to it, and those writes vanish when it resyncs from the new
    primary. This pool asks again at most every RECHECK_S when a connection is taken; when the master moved, the
    idle connections are closed and the next command goes to the new one."""

    recheck_s = RECHECK_S

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._checked_at = time.monotonic()

    def get_connection(self, *args, **kwargs):
        now = time.monotonic()
        if now - self._checked_at >= self.recheck_s:
            # Two threads checking at once is harmless: both ask the sentinels, one closes the idle connections.
            self._checked_at = now
            try:
                self.get_master_address()  # closes the idle connections when the master moved
            except (MasterNotFoundError, RedisConnectionError, RedisTimeoutError):
                pass  # no sentinel answers: the connection's own connect() will say so
        return super().get_connection(*args, **kwargs)

    def moved(self, connection):
        """Whether ``connection`` (open) is to another server than the master the sentinels name now."""
        if connection._sock is None:
            return False
        try:
            return self.get_master_address() != (connection.host, connection.port)
        except (MasterNotFoundError, RedisConnectionError, RedisTimeoutError):
            return False
