"""Submit an admin page's form as a browser would: every field as the page rendered it, plus what the test sets."""

from html.parser import HTMLParser


class FormFields(HTMLParser):
    """The fields of the <form id=...> as a browser would submit them, unchanged."""

    def __init__(self, form_id):
        super().__init__()
        self.form_id = form_id
        self.fields, self._in_form, self._select, self._textarea = [], False, None, None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "form" and attrs.get("id") == self.form_id:
            self._in_form = True
        if not self._in_form or ("name" not in attrs and tag != "option"):
            return
        if tag == "input":
            kind = attrs.get("type", "text")
            if kind in ("checkbox", "radio") and "checked" not in attrs:
                return
            if kind not in ("submit", "button", "file", "image"):
                self.fields.append((attrs["name"], attrs.get("value", "on" if kind == "checkbox" else "")))
        elif tag == "select":
            self._select = attrs["name"]
        elif tag == "option" and self._select and "selected" in attrs:
            self.fields.append((self._select, attrs.get("value", "")))
        elif tag == "textarea":
            self._textarea = attrs["name"]
            self.fields.append((self._textarea, ""))

    def handle_data(self, data):
        if self._textarea:
            name, value = self.fields[-1]
            self.fields[-1] = (name, value + data)

    def handle_endtag(self, tag):
        if tag == "select":
            self._select = None
        elif tag == "textarea":
            self._textarea = None
        elif tag == "form":
            self._in_form = False


def form_fields(html, form_id):
    """[(name, value)] of the page's form ``form_id`` (the admin's is "<model>_form"), as rendered."""
    parser = FormFields(form_id)
    parser.feed(html)
    return parser.fields


def with_fields(fields, **changes):
    """The fields as a dict of lists (what Django's test client posts), with ``changes`` applied."""
    data = {}
    for name, value in fields:
        data.setdefault(name, []).append(value)
    for name, value in changes.items():
        data[name.replace("__", "-")] = value if isinstance(value, list) else [value]
    return data
