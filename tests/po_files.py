"""Read a gettext .po file without gettext: its entries as {(context, msgid): (translations, fuzzy)}."""

import ast
import re

FIELD = re.compile(r"^(msgctxt|msgid_plural|msgid|msgstr(?:\[\d+\])?) (\".*\")$")


def entries(text):
    """{(msgctxt or None, msgid): ((msgstr, ...), fuzzy)} of every entry but the header and obsolete ones (#~)."""
    found, current, field, fuzzy = {}, {}, None, False

    def close():
        nonlocal current, fuzzy
        if current.get("msgid"):
            forms = tuple(value for name, value in sorted(current.items()) if name.startswith("msgstr"))
            found[(current.get("msgctxt"), current["msgid"])] = (forms, fuzzy)
        current, fuzzy = {}, False

    for line in text.splitlines():
        if not line.strip():
            close()
            field = None
        elif line.startswith("#,"):
            fuzzy = fuzzy or "fuzzy" in line
        elif line.startswith("#"):
            continue
        elif match := FIELD.match(line):
            field = match[1]
            current[field] = ast.literal_eval(match[2])
        elif line.startswith('"') and field:
            current[field] += ast.literal_eval(line)
    close()
    return found
