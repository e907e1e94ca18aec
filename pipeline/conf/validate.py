"""Checks shared by the settings resolvers: each raises ImproperlyConfigured naming the exact setting."""

import re
from functools import lru_cache

from django.core.exceptions import ImproperlyConfigured

# Kind and channel names travel inside Redis keys, Lua arguments and JSON: plain characters only.
NAME = re.compile(r"[\w.:-]{1,100}")


def positive_int(value, setting, minimum=1):
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ImproperlyConfigured(f"{setting} must be an integer >= {minimum}, got {value!r}")
    return value


def mapping(value, setting):
    if not isinstance(value, dict):
        raise ImproperlyConfigured(f"{setting} must be a dict, got {type(value).__name__}")
    return value


@lru_cache(maxsize=64)
def flag(value, setting):
    if not isinstance(value, bool):
        raise ImproperlyConfigured(f"{setting} must be True or False, got {value!r}")
    return value
