"""Render one user's digest (digest.grouping's ``digest`` argument) into a subject, a text body and an HTML body."""

import re
from urllib.parse import quote

from django.template.context import make_context
from django.template.loader import get_template

from pipeline.conf.kinds import URL_FIELD
from pipeline.text import single_line

TEXT_TEMPLATE = "sluice/digest/user.txt"
HTML_TEMPLATE = "sluice/digest/user.html"
# A listed item's title is cut here: one long payload title must not make the message unbounded.
MAX_TITLE = 200


def context_of(digest, user, kinds):
    """The templates' context: ``items`` (each with its title and link), ``total`` events, ``groups`` (listed and
    not), ``more`` groups not listed and their ``more_events``, the ``user``, and the ``group`` ("user" or a kind)."""
    items = [_item(item, kinds.get(item["kind"])) for item in digest["items"]]
    total = sum(item["count"] for item in items) + digest["more_events"]
    return {
        "user": user,
        "group": digest["group"],
        "items": items,
        "total": total,
        "groups": len(items) + digest["more"],
        "more": digest["more"],
        "more_events": digest["more_events"],
    }


def render(digest, user, kinds):
    """Return (subject, text body, HTML body) from sluice/digest/user.txt (its first line is the subject) and
    sluice/digest/user.html, which a host overrides with templates of the same names."""
    context = context_of(digest, user, kinds)
    # The text part is plain text: HTML escaping would turn a title's "Tom & Jerry" into "Tom &amp; Jerry".
    text = get_template(TEXT_TEMPLATE).template.render(make_context(context, autoescape=False))
    subject, _, body = text.strip().partition("\n")
    html = get_template(HTML_TEMPLATE).render(context)
    return single_line(subject), _tidy(body), html.strip()


def _tidy(body):
    # The template's tags leave blank lines behind; at most one is kept between paragraphs.
    return re.sub(r"\n\s*\n(\s*\n)+", "\n\n", body.strip())


def _item(item, kind):
    payload = item.get("payload") or {}
    title = payload.get("title") if isinstance(payload, dict) else None
    title = str(title or item.get("entity_id") or item["kind"])
    if len(title) > MAX_TITLE:
        title = title[: MAX_TITLE - 1] + "…"
    return {**item, "title": title, "url": link(kind.url if kind else "", item, payload)}


def link(template, item, payload):
    """The kind's URL template filled from the item ({entity_id}, {user_id}, {kind}) or a top-level payload field,
    each value quoted; "" when the kind has none or a field it names is missing."""
    if not template:
        return ""
    values = {"entity_id": item.get("entity_id"), "kind": item.get("kind")}
    missing = False

    def fill(found):
        nonlocal missing
        name = found[1]
        value = values.get(name) if name in values else payload.get(name) if isinstance(payload, dict) else None
        if value is None or isinstance(value, (dict, list)):
            missing = True
            return ""
        return quote(str(value), safe="")

    url = URL_FIELD.sub(fill, template)
    return "" if missing else url
