"""Rendering: per-kind templates, translatable, with plural forms for digests."""

from notifications.kinds import get_kind
from notifications.render import render


def test_digest_uses_plural_forms():
    kind = get_kind("task.comment")
    one = render(kind, {"count": 1, "entity_id": "t", "payload": {"title": "Q3"}}, digest=True)
    many = render(kind, {"count": 20, "entity_id": "t", "payload": {"title": "Q3"}}, digest=True)
    assert one[0] == "1 new comment in task «Q3»"
    assert many[0] == "20 new comments in task «Q3»"


def test_kind_without_its_own_template_uses_the_default(settings):
    settings.SLUICE_KINDS = {"invoice.paid": {"class": "routine", "channels": ["email"]}}
    subject, _body = render(get_kind("invoice.paid"), {"kind": "invoice.paid", "entity_id": "inv-1", "payload": {}})
    assert subject == "Invoice paid: inv-1"  # the kind's name in words, never its key
    digest_subject, _ = render(get_kind("invoice.paid"), {"count": 3, "entity_id": "inv-1", "payload": {}}, digest=True)
    assert digest_subject == "3 updates on inv-1"


def test_txt_templates_are_plain_text_not_html(settings):
    settings.SLUICE_KINDS = {"invoice.paid": {"class": "routine", "channels": ["email"]}}
    title = 'Tom & Jerry\'s <b>"deal"</b>'
    context = {"kind": "invoice.paid", "entity_id": "i", "payload": {"title": title}}
    subject, body = render(get_kind("invoice.paid"), context)
    assert subject == f"Invoice paid: {title}"
    assert title in body
    assert "&amp;" not in subject + body


def test_the_subject_is_one_line_without_control_characters():
    kind = get_kind("task.comment")
    context = {"count": 2, "entity_id": "t", "payload": {"title": "Q3\r\x1b[2J\x07 \u2028x"}}
    subject, _ = render(kind, context, digest=True)
    assert subject == "2 new comments in task «Q3 x»"


def test_a_kinds_title_is_what_the_default_text_shows(settings):
    settings.SLUICE_KINDS = {"invoice.paid": {"class": "routine", "channels": ["email"], "title": "Payment received"}}
    subject, body = render(get_kind("invoice.paid"), {"kind": "invoice.paid", "entity_id": "inv-7", "payload": {}})
    assert (subject, body) == ("Payment received: inv-7", "There is news about inv-7.")
    assert "invoice.paid" not in subject + body
