"""Checks shared by the settings resolvers: each raises ImproperlyConfigured naming the exact setting."""

from django.core.exceptions import ImproperlyConfigured


def positive_int(value, setting, minimum=1):
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ImproperlyConfigured(f"{setting} must be an integer >= {minimum}, got {value!r}")
    return value


def mapping(value, setting):
    if not isinstance(value, dict):
        raise ImproperlyConfigured(f"{setting} must be a dict, got {type(value).__name__}")
    return value
