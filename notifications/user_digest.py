"""Render one user's digest (digest.grouping's ``digest`` argument) into a subject, a text body, its items as data
(channels.base.DigestItem) and the context its HTML template (sluice/digest/user.html, in the email layout) takes."""

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import quote

from django.template.context import make_context
from django.template.loader import get_template

from pipeline.conf.kinds import URL_FIELD
from pipeline.conf.mail import mail_settings
from pipeline.text import single_line

from .channels.base import DigestItem

TEXT_TEMPLATE = "sluice/digest/user.txt"
HTML_TEMPLATE = "sluice/digest/user.html"
# A listed item's title is cut here: one long payload title must not make the message unbounded.
MAX_TITLE = 200


@dataclass(frozen=True)
class Rendered:
    """A user's digest rendered: its subject and text body, its items as data, and its templates' context."""

    subject: str
    body: str
    items: tuple
    context: dict
    # The kinds it lists that are still registered (Kind objects), for its unsubscribe link and its footer.
    kinds: tuple


def context_of(digest, user, kinds):
    """The templates' context: ``items`` (each with its title, kind title, link and times), ``total`` events,
    ``groups`` (listed and not), ``more`` groups not listed and their ``more_events``, the ``user``, and the
    ``group`` ("user" or a kind)."""
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
    """The Rendered digest, from sluice/digest/user.txt (its first line is the subject), which a host overrides with
    a template of the same name. Render it in the reader's language and zone (notifications.reader.reading)."""
    context = context_of(digest, user, kinds)
    # The text part is plain text: HTML escaping would turn a title's "Tom & Jerry" into "Tom &amp; Jerry".
    text = get_template(TEXT_TEMPLATE).template.render(make_context(context, autoescape=False))
    subject, _, body = text.strip().partition("\n")
    listed = tuple(dict.fromkeys(kinds[item["kind"]] for item in digest["items"] if item["kind"] in kinds))
    items = tuple(_data(item) for item in context["items"])
    return Rendered(single_line(subject), _tidy(body), items, context, listed)


def _tidy(body):
    # The template's tags leave blank lines behind; at most one is kept between paragraphs.
    return re.sub(r"\n\s*\n(\s*\n)+", "\n\n", body.strip())


def _item(item, kind):
    payload = item.get("payload") or {}
    title = payload.get("title") if isinstance(payload, dict) else None
    title = str(title or item.get("entity_id") or item["kind"])
    if len(title) > MAX_TITLE:
        title = title[: MAX_TITLE - 1] + "…"
    return {
        **item,
        "title": title,
        "kind_title": str(kind.title) if kind else item["kind"],
        "url": absolute(link(kind.url if kind else "", item, payload)),
        "first_at": _when(item.get("first_seen")),
        "last_at": _when(item.get("last_seen")),
    }


def _data(item):
    payload = item.get("payload")
    return DigestItem(
        kind=item["kind"],
        entity_id=item.get("entity_id") or "",
        count=item["count"],
        title=item["title"] if item.get("grain", "entity") == "entity" else "",
        url=item["url"],
        payload=payload if isinstance(payload, dict) else {},
        first_seen=item.get("first_seen"),
        last_seen=item.get("last_seen"),
        grain=item.get("grain", "entity"),
    )


def _when(seconds):
    """An aware datetime (UTC) of ``seconds`` since the epoch, which templates show in the reader's zone."""
    if not isinstance(seconds, (int, float)) or isinstance(seconds, bool):
        return None
    return datetime.fromtimestamp(seconds, UTC)


def absolute(url):
    """A link as a message outside the site needs it: a path on SLUICE_SITE_URL (unchanged while it is unset)."""
    if url.startswith("/") and not url.startswith("//"):
        return mail_settings().absolute(url) or url
    return url


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
