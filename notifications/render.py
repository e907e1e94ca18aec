"""Render a kind's Django template into a subject (its first line) and a body (the rest)."""

from django.template.loader import select_template

DEFAULT_TEMPLATE = "notifications/default.txt"


def render(template_name, context):
    """Return (subject, body) from ``template_name``, or the default template when it is missing."""
    text = select_template([template_name, DEFAULT_TEMPLATE]).render(context)
    subject, _, body = text.strip().partition("\n")
    return subject.strip(), body.strip()
