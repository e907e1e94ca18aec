"""{% load sluice_inbox %}{% sluice_inbox_bell %}: the inbox's bell, count and dropdown, for the host's templates."""

from django import template

from ..inbox import bell

register = template.Library()


@register.inclusion_tag("sluice/inbox/bell.html", takes_context=True)
def sluice_inbox_bell(context, poll_s=bell.POLL_S, namespace="sluice"):
    """The bell with the signed-in user's unread count, a dropdown of their latest items and "mark all read".
    ``namespace`` is the one notifications.urls was included under (app_name "sluice" by default)."""
    request = context.get("request")
    return {**bell.context(request, poll_s, namespace), "csrf_token": context.get("csrf_token")}
