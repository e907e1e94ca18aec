"""The coordination Redis: one connection pool per process, and the Lua scripts in pipeline/lua."""

import os
import re
import threading
from functools import cache
from pathlib import Path

from . import urls
from .conf import sluice_settings

LUA_DIR = Path(__file__).with_name("lua")


class _Client:
    """A client for one URL in one process, with its registered scripts; replaced whole, never edited."""

    def __init__(self, url):
        self.key = (url, os.getpid())
        self.redis = urls.make_client(url)
        self.scripts = {}


_lock = threading.Lock()
_current = None


def get_redis():
    """The shared client for SLUICE_REDIS_URL: safe under threads; a forked child builds its own pool,
    never its parent's sockets."""
    return _client().redis


def _client():
    global _current
    url = sluice_settings().redis_url
    key = (url, os.getpid())
    current = _current
    if current is not None and current.key == key:
        return current
    with _lock:
        if _current is None or _current.key != key:
            old, _current = _current, _Client(url)
            if old is not None and old.key[1] == key[1]:
                old.redis.close()  # same process, new URL: the old pool's sockets are ours to close
        return _current


def reset():
    """Forget this process's client (tests; a settings change picks a new one up by itself)."""
    global _current
    with _lock:
        _current = None


def use_redis(url):
    """Point Sluice at the Redis at ``url`` from now on, in this process: the store, and the Celery app's
    broker and connection pools (benchmarks, the demo and tests; a deployment sets SLUICE_REDIS_URL)."""
    from django.conf import settings

    from .celery import app, broker_settings

    settings.SLUICE_REDIS_URL = url
    sluice_settings.cache_clear()
    app.conf.update(broker_settings(url))
    # Dropped, not closed: kombu keeps the pools in a registry by URL, and hands the same one back when a
    # process points at that URL again.
    app._pool = None
    app.amqp._producer_pool = None


INCLUDE = re.compile(r"^--! include (\w+)$", re.M)


@cache
def lua_source(path):
    """A script's text, with each ``--! include <name>`` line replaced by pipeline/lua/include/<name>.lua."""
    text = Path(path).read_text()
    return INCLUDE.sub(lambda found: (LUA_DIR / "include" / f"{found[1]}.lua").read_text().strip(), text)


class Scripts:
    """The Lua scripts of one folder, each registered once per client (EVALSHA, then EVAL after a restart)."""

    def __init__(self, folder):
        self.folder = Path(folder)

    def path(self, name):
        return self.folder / f"{name}.lua"

    def __call__(self, name):
        client = _client()
        path = self.path(name)
        found = client.scripts.get(path)
        if found is None:
            # Registering twice from two threads is harmless: both objects run the same script.
            found = client.scripts.setdefault(path, client.redis.register_script(lua_source(path)))
        return found


#: The engine's own scripts, in pipeline/lua.
script = Scripts(LUA_DIR)


def _after_fork_in_child():
    # A lock held by another thread at fork time would never be released in the child.
    global _lock, _current
    _lock = threading.Lock()
    _current = None


os.register_at_fork(after_in_child=_after_fork_in_child)
