"""Flower for Sluice's app, never without authentication: task arguments and the workers' controls are in it.

A Flower login can see every task, shut workers down and send tasks: it is for operators only. Basic auth
comes from FLOWER_BASIC_AUTH ("user:password", several separated by commas), or Flower's own --basic-auth
or --auth (OAuth) options; an empty password counts as none.
"""

import os

from django.core.exceptions import ImproperlyConfigured


def basic_auth_pairs(value):
    """The user:password pairs of a FLOWER_BASIC_AUTH value that have both parts."""
    pairs = [pair.strip() for pair in (value or "").split(",")]
    return [pair for pair in pairs if pair.partition(":")[0] and pair.partition(":")[2]]


def refuse_without_auth(argv, environ=os.environ):
    """Raise ImproperlyConfigured unless Flower will ask for a login."""
    options = [arg.partition("=") for arg in argv]
    if any(name == "--auth" and value for name, _, value in options):
        return
    given = [value for name, _, value in options if name == "--basic-auth"]
    if basic_auth_pairs(",".join(given) or environ.get("FLOWER_BASIC_AUTH", "")):
        return
    raise ImproperlyConfigured(
        "Flower needs a login: set FLOWER_BASIC_AUTH=user:password (a non-empty password), or pass --auth for "
        "OAuth. Task arguments hold personal data, and a Flower login can shut workers down."
    )
