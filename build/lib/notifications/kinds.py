"""The registry of kinds: kind -> class, channels and templates, as SLUICE_KINDS declares them."""

from pipeline.conf import sluice_settings

from .exceptions import UnknownKind


def get_kind(name):
    """The Kind called ``name``; raise UnknownKind naming it and the known kinds."""
    kinds = sluice_settings().kinds
    try:
        return kinds[name]
    except (KeyError, TypeError):
        known = ", ".join(sorted(kinds))
        raise UnknownKind(f"unknown notification kind {name!r}; known kinds: {known}") from None


def all_kinds():
    """Every registered kind, by name."""
    return dict(sluice_settings().kinds)
