"""The coordination Redis: one connection pool per process, and the Lua scripts in pipeline/lua."""

import os
import threading
from functools import cache
from pathlib import Path

import redis
from django.conf import settings

LUA_DIR = Path(__file__).with_name("lua")


class _Client:
    """A client for one URL in one process, with its registered scripts; replaced whole, never edited."""

    def __init__(self, url):
        self.key = (url, os.getpid())
        self.redis = redis.Redis.from_url(url, socket_connect_timeout=2, socket_timeout=5, health_check_interval=30)
        self.scripts = {}


_lock = threading.Lock()
_current = None


def get_redis():
    """The shared client for REDIS_URL: safe under threads; a forked child builds its own pool, never
    its parent's sockets."""
    return _client().redis


def _client():
    global _current
    key = (settings.REDIS_URL, os.getpid())
    current = _current
    if current is not None and current.key == key:
        return current
    with _lock:
        if _current is None or _current.key != key:
            old, _current = _current, _Client(settings.REDIS_URL)
            if old is not None and old.key[1] == key[1]:
                old.redis.close()  # same process, new URL: the old pool's sockets are ours to close
        return _current


def reset():
    """Forget this process's client (tests; a settings change picks a new one up by itself)."""
    global _current
    with _lock:
        _current = None


@cache
def _lua_source(name):
    return (LUA_DIR / f"{name}.lua").read_text()


def script(name):
    """A registered Lua script (EVALSHA, falling back to EVAL after a Redis restart)."""
    client = _client()
    found = client.scripts.get(name)
    if found is None:
        # Registering twice from two threads is harmless: both objects run the same script.
        found = client.scripts.setdefault(name, client.redis.register_script(_lua_source(name)))
    return found


def _after_fork_in_child():
    # A lock held by another thread at fork time would never be released in the child.
    global _lock, _current
    _lock = threading.Lock()
    _current = None


os.register_at_fork(after_in_child=_after_fork_in_child)
