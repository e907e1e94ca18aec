"""The email layout: every email Sluice sends is its text with a footer, and HTML in sluice/email/base.html (the
host's name and logo, the content, and a footer with the preference link, the unsubscribe link and why the person
got it), its CSS inlined at render time (css-inline), since mail clients drop or ignore <style> blocks."""

from dataclasses import dataclass
from functools import cache

from django.template.context import make_context

from pipeline.conf.mail import mail_settings

from .render import _template
from .unsubscribe_links import path_of

MESSAGE_TEMPLATE = "sluice/email/message.html"
FOOTER_TEMPLATE = "sluice/email/footer.txt"


@dataclass(frozen=True)
class Email:
    """One email's two parts: the text (with its footer) and the HTML (CSS inlined)."""

    text: str
    html: str


def layout_context(subject, kinds, unsubscribe_url, digest=False):
    """What the layout and its footer show: the site's name, logo and address, the subject, the links to the
    preference page, the inbox page and to unsubscribe, and why the person got it (``kinds``: the Kind objects it
    is about)."""
    conf = mail_settings()
    preferences, inbox = path_of("sluice:preferences_page"), path_of("sluice:inbox_page")
    return {
        "subject": subject,
        "site_name": conf.site_name,
        "site_url": conf.site_url,
        "logo_url": conf.logo_url,
        "preferences_url": conf.absolute(preferences) if preferences else "",
        "inbox_url": conf.absolute(inbox) if inbox else "",
        "unsubscribe_url": unsubscribe_url,
        "digest": digest,
        "mandatory": bool(kinds) and all(kind.mandatory for kind in kinds),
        "kind_titles": ", ".join(dict.fromkeys(str(kind.title) for kind in kinds)),
    }


def render(body, html_names, context):
    """The Email of a message whose text is ``body``: the text with sluice/email/footer.txt, and the first of
    ``html_names`` that exists rendered with ``context`` (the message's own, and layout_context's), CSS inlined."""
    footer = _template((FOOTER_TEMPLATE,)).template.render(make_context(context, autoescape=False))
    # A link the layout has not (no preference page, a mandatory kind) leaves its line empty: dropped.
    footer = "\n".join(line.rstrip() for line in footer.splitlines() if line.strip())
    text = f"{body}\n\n-- \n{footer}" if footer else body
    html = _template(tuple(html_names)).render({**context, "body": body})
    return Email(text, inline(html))


def message_templates(kind):
    """The HTML templates of a kind's own message: sluice/email/<kind>.html, else the text in the layout."""
    return (f"sluice/email/{kind.name.replace('.', '_')}.html", MESSAGE_TEMPLATE)


def inline(html):
    """``html`` with its <style> rules moved into style attributes, and no <style> block left; never fetches."""
    return _inliner().inline(html)


@cache
def _inliner():
    import css_inline

    # Nothing remote: a template's <link> to a stylesheet is never fetched by a worker.
    return css_inline.CSSInliner(keep_style_tags=False, keep_link_tags=False, load_remote_stylesheets=False)
