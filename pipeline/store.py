"""The coordination Redis: one connection pool per process, and the Lua scripts in pipeline/lua."""

import os
from functools import cache
from pathlib import Path

import redis
from django.conf import settings

LUA_DIR = Path(__file__).with_name("lua")
_local = {}


def get_redis():
    """The shared client for REDIS_URL; a forked child gets its own pool, never its parent's sockets."""
    key = (settings.REDIS_URL, os.getpid())
    if _local.get("key") != key:
        if "client" in _local and _local["key"][1] == key[1]:
            _local["client"].close()  # same process, new URL: the old pool's sockets are ours to close
        _local.clear()
        _local["key"] = key
        _local["client"] = redis.Redis.from_url(
            settings.REDIS_URL,
            socket_connect_timeout=2,
            socket_timeout=5,
            health_check_interval=30,
        )
        _local["scripts"] = {}
    return _local["client"]


@cache
def _lua_source(name):
    return (LUA_DIR / f"{name}.lua").read_text()


def script(name):
    """A registered Lua script (EVALSHA, falling back to EVAL after a Redis restart)."""
    client = get_redis()
    scripts = _local["scripts"]
    if name not in scripts:
        scripts[name] = client.register_script(_lua_source(name))
    return scripts[name]
