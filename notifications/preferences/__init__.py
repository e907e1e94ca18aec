"""Users' preferences: what they choose per kind and channel, their quiet hours and digest cadence.

The public API (``get``, ``set``, ``set_quiet_hours``, ``set_cadence`` and the rest of ``choices``) is named here
and loaded on first use, so importing the package (as Django does when it loads the models) loads nothing else.
"""

from importlib import import_module


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    # import_module, not `from . import choices`: that asks this very function for `choices` first.
    return getattr(import_module(f"{__name__}.choices"), name)
