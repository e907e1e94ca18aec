"""wait_for(): poll a condition until it holds, or fail the test saying what never happened."""

import time

import pytest

#: How often a condition is polled: short against a worker's pickup time (a few ms), long against a poll.
POLL_S = 0.02


def wait_for(predicate, timeout=20.0, what=None):
    """Poll ``predicate`` until it returns something true, and return that; fail the test after ``timeout`` s.

    ``what`` says what was waited for: a string, or a callable returning one (called only on failure, so it may
    describe the state that was found, such as what is still queued). Without it the message names the predicate.
    """
    deadline = time.monotonic() + timeout
    while True:
        found = predicate()
        if found:
            return found
        if time.monotonic() >= deadline:
            break
        time.sleep(POLL_S)
    said = what() if callable(what) else what
    said = said or getattr(predicate, "__qualname__", repr(predicate))
    pytest.fail(f"never happened within {timeout:g} s: {said}", pytrace=True)


def settled(*queues, client=None):
    """Nothing waits in ``queues``, nothing is fetched but unrecorded, and nothing is delivered but unacknowledged
    (kombu's unacked record): every send that was coming has come, so a test may count them."""
    from pipeline.connections import get_redis
    from pipeline.redis import keys

    client = client or get_redis()
    fetched = any(client.llen(key) for key in client.scan_iter(f"{keys.fetch_prefix()}*:processing:*"))
    return not fetched and not client.hlen("unacked") and not any(client.llen(queue) for queue in queues)


def fetching(count, client=None):
    """At least ``count`` worker consumers have made their first fetch (each registers itself in the same write as
    its fetch, pipeline.broker.transport): the workers are connected and taking messages."""
    from pipeline.connections import get_redis
    from pipeline.redis import keys

    return (client or get_redis()).scard(keys.fetch_consumers()) >= count
