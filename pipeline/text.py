"""Text that cannot break out of its line: for email headers (and subjects) and for Sluice's log lines.

A caller's payload can reach a subject through a template, and a provider's answer can reach a log line
through an exception's message. A CR or LF there makes Django refuse the header (and the email is lost after
its retries), or forges a log line; an escape code rewrites an operator's terminal.
"""

import logging
import re
import unicodedata

# ANSI escape sequences (CSI "ESC [ ... final", OSC "ESC ] ... BEL or ESC \", and two-byte "ESC x"), and C1's CSI.
_ESCAPE_SEQUENCE = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-Z\\-_]|\x9b[0-?]*[ -/]*[@-~]"
)
#: Every logger Sluice logs to; tests/unit/test_text.py checks that no module logs to another.
LOGGERS = (
    "sluice.activity",
    "sluice.admission",
    "sluice.batch",
    "sluice.breaker",
    "sluice.delivery",
    "sluice.digest",
    "sluice.durability",
    "sluice.exporter",
    "sluice.fetch",
    "sluice.housekeeping",
    "sluice.inbox",
    "sluice.ingest",
    "sluice.metrics",
    "sluice.preferences",
    "sluice.providers",
    "sluice.scheduling",
    "sluice.send",
    "sluice.topics",
    "sluice.tracking",
)


def _breaks(char):
    # Cc: C0 and C1 controls (CR, LF, TAB, ESC, NEL ...); Zl/Zp: the Unicode line and paragraph separators.
    return unicodedata.category(char) in ("Cc", "Zl", "Zp")


def single_line(text):
    """``text`` as one header-safe line: escape sequences removed, every other control character a space."""
    text = str(text)
    if text.isascii() and text.isprintable():
        # The common case, checked in C: printable ASCII has no control character, escape or line separator.
        return " ".join(text.split())
    text = _ESCAPE_SEQUENCE.sub("", text)
    return " ".join("".join(" " if _breaks(c) else c for c in text).split())


def escape_controls(text):
    """``text`` with every control character written as its escape (``\\r``, ``\\x1b``), so it stays one line."""
    text = str(text)
    if not any(_breaks(c) for c in text):
        return text
    return "".join(c.encode("unicode_escape").decode("ascii") if _breaks(c) else c for c in text)


class EscapeControlCharacters(logging.Filter):
    """Escapes control characters in a record's arguments: the values a line quotes, which may come from a
    caller or a provider. The format string is Sluice's own and keeps its layout."""

    def filter(self, record):
        if isinstance(record.args, tuple):
            record.args = tuple(_safe(arg) for arg in record.args)
        elif isinstance(record.args, dict):
            record.args = {key: _safe(value) for key, value in record.args.items()}
        return True


def _safe(value):
    if isinstance(value, (int, float)) or value is None:
        return value
    return escape_controls(value)


def install_log_filter():
    """Add the filter to each of Sluice's loggers, once; loggers of other names are left alone."""
    for name in LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, EscapeControlCharacters) for f in logger.filters):
            logger.addFilter(EscapeControlCharacters())
