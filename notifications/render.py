"""Render a kind's Django template into a subject (its first line) and a body (the rest)."""

import logging

from django.db import DatabaseError
from django.template import engines
from django.template.backends.django import Template as DjangoTemplate
from django.template.context import make_context
from django.template.loader import select_template
from django.utils.functional import SimpleLazyObject

from pipeline.text import single_line

logger = logging.getLogger("sluice.send")

DEFAULT_TEMPLATE = "sluice/default.txt"
DEFAULT_DIGEST_TEMPLATE = "sluice/digest/default.txt"


def render(kind, context, digest=False):
    """Return (subject, body) for ``kind``: its own template, or the default one when it has none. A digest of a
    coarser grain (its events folded per user|kind, or per user, when the store was under pressure) renders with
    sluice/digest/by_kind.txt or by_user.txt.

    The subject is one line without control characters, since it becomes an email header. The context gets the
    kind's ``kind_title`` ("Invoice paid"), which the default templates show instead of its key.
    """
    context = {"kind_title": str(kind.title), **context}
    grain = context.get("grain", "entity")
    if digest and grain != "entity":
        names = [f"sluice/digest/by_{grain}.txt", DEFAULT_DIGEST_TEMPLATE]
    elif digest:
        names = [kind.digest_template, DEFAULT_DIGEST_TEMPLATE]
    else:
        names = [kind.template, DEFAULT_TEMPLATE]
    text = _render(_template(tuple(names)), context)
    subject, _, body = text.strip().partition("\n")
    return single_line(subject), body.strip()


def _template(names):
    """The template ``select_template(names)`` picks, kept per tuple of names: every send of a kind asks for the
    same names, and Django's cached loader caches loading, not the lookup across engines and loaders (measured
    at about a quarter of the render's time). Forgotten when the template engines are rebuilt (TEMPLATES changed)."""
    global _engines_seen
    if engines.templates is not _engines_seen:
        _picked.clear()
        _engines_seen = engines.templates
    found = _picked.get(names)
    if found is None:
        found = _picked[names] = select_template(list(names))
    return found


_picked = {}
_engines_seen = None


def _render(template, context):
    # A .txt template is plain text (an email, an SMS, a webhook's JSON field): HTML escaping would turn a
    # payload's "Tom & Jerry" into "Tom &amp; Jerry". Other templates, and other engines, render as configured.
    name = getattr(getattr(template, "origin", None), "template_name", None) or ""
    if isinstance(template, DjangoTemplate) and name.endswith(".txt"):
        return template.template.render(make_context(context, autoescape=False))
    return template.render(context)


def recipient(user_id):
    """The recipient user for a template's context (``{{ user.first_name }}``), loaded from the database only when
    the template uses it; None when the user is gone, or the database cannot be read."""

    def load():
        from django.contrib.auth import get_user_model

        try:
            return get_user_model()._default_manager.filter(pk=user_id).first()
        except DatabaseError as exc:
            # Sending needs Redis, not the database: a greeting is not worth holding a send back for.
            logger.warning("the recipient of a message could not be loaded (%s); its template gets no user", exc)
            return None

    return SimpleLazyObject(load)
