"""The coordination client: one per process, safe when many threads ask at once and after a fork."""

import os
import sys
import threading

import pytest

from pipeline import connections


@pytest.fixture
def fast_switching():
    # Threads switch every microsecond, so a check-then-build race shows within a few rounds.
    previous = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(previous)


def first_calls(threads):
    """Clear the cache, then call get_redis() and script() from ``threads`` threads at once."""
    connections.reset()
    barrier = threading.Barrier(threads)
    clients, errors = [], []

    def first_call():
        barrier.wait()
        try:
            clients.append(connections.get_redis())
            connections.script("claim_send")
        except Exception as exc:  # noqa: BLE001 - any error is the finding
            errors.append(repr(exc))

    workers = [threading.Thread(target=first_call) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(10)
    return clients, errors


def test_first_calls_from_many_threads_all_get_one_working_client(redis_client, fast_switching):
    for _round in range(200):
        clients, errors = first_calls(8)
        assert not errors, errors[:3]
        assert len({id(c) for c in clients}) == 1
    assert connections.get_redis().ping()


def test_a_forked_child_builds_its_own_client(redis_client):
    parent = connections.get_redis()
    parent.set("sluice:test:fork", "1")
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report whether it got a new client that works, then leave at once
        try:
            child = connections.get_redis()
            ok = child is not parent and child.get("sluice:test:fork") == b"1"
        except Exception:  # noqa: BLE001 - the child reports any failure through the pipe
            ok = False
        os.write(write, b"1" if ok else b"0")
        os._exit(0)
    os.close(write)
    answer = os.read(read, 1)
    os.close(read)
    os.waitpid(pid, 0)
    assert answer == b"1"
    assert connections.get_redis() is parent


def test_one_client_per_url_and_one_redis_however_its_url_is_spelt(redis_server):
    url = redis_server.url
    other = url.replace("redis://", "redis://:@").removesuffix("/0")
    assert connections.get_redis(url) is connections.get_redis(url)
    assert connections.same_redis(url, other)
    assert connections.distinct([url, other]) == [url]
    assert connections.get_redis(url) is not connections.get_redis(url.replace("/0", "/1"))
    connections.get_redis(url.replace("/0", "/1")).ping()


def test_a_script_runs_on_the_client_it_is_handed(redis_server):
    other = connections.get_redis(redis_server.url.replace("/0", "/2"))
    other.flushdb()
    previous, _left = connections.script("claim_send", on=other)(keys=["sluice:sent:x:email"], args=[60])
    assert previous == b"claimed"
    assert other.get("sluice:sent:x:email") == b"sending"
    assert not connections.get_redis().exists("sluice:sent:x:email")
    other.flushdb()
