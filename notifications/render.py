"""Render a kind's Django template into a subject (its first line) and a body (the rest)."""

from django.template.loader import select_template

DEFAULT_TEMPLATE = "sluice/default.txt"
DEFAULT_DIGEST_TEMPLATE = "sluice/digest/default.txt"


def render(kind, context, digest=False):
    """Return (subject, body) for ``kind``: its own template, or the default one when it has none. A digest of a
    coarser grain (its events folded per user|kind, or per user, when the store was under pressure) renders with
    sluice/digest/by_kind.txt or by_user.txt."""
    grain = context.get("grain", "entity")
    if digest and grain != "entity":
        names = [f"sluice/digest/by_{grain}.txt", DEFAULT_DIGEST_TEMPLATE]
    elif digest:
        names = [kind.digest_template, DEFAULT_DIGEST_TEMPLATE]
    else:
        names = [kind.template, DEFAULT_TEMPLATE]
    text = select_template(names).render(context)
    subject, _, body = text.strip().partition("\n")
    return subject.strip(), body.strip()
