"""Headers and log lines stay one line: control characters from callers and providers are removed or escaped."""

import logging
import re

import pytest

from pipeline.text import LOGGERS, escape_controls, single_line
from sluice_tools.processes import ROOT


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("Invoice\r\nBcc: x@example.com", "Invoice Bcc: x@example.com"),
        ("red \x1b[31mALERT\x1b[0m done", "red ALERT done"),
        ("title \x1b]0;pwned\x07 here", "title here"),
        ("a\u2028b\u2029c\x85d\x00e\tf", "a b c d e f"),
        ("  plain  ", "plain"),
        ("«Q3» déjà vu", "«Q3» déjà vu"),
    ],
)
def test_single_line(text, line):
    assert single_line(text) == line


def test_escape_controls_keeps_the_text_readable_on_one_line():
    assert escape_controls("boom\r\nINFO forged\x1b[2J") == "boom\\r\\nINFO forged\\x1b[2J"
    assert escape_controls("déjà «vu»") == "déjà «vu»"


def test_sluices_log_lines_cannot_be_forged(caplog):
    caplog.set_level(logging.INFO)
    provider_said = "550 no\r\n2026-01-01 INFO sluice.send all good"
    logging.getLogger("sluice.send").warning("send %s failed: %s (%d)", "n1", provider_said, 3)
    logging.getLogger("elsewhere").warning("untouched %s", "a\nb")
    ours, theirs = caplog.records[-2:]
    assert ours.getMessage() == "send n1 failed: 550 no\\r\\n2026-01-01 INFO sluice.send all good (3)"
    assert theirs.getMessage() == "untouched a\nb"  # another library's logger is not Sluice's to change


def test_every_logger_sluice_uses_is_filtered():
    used = set()
    for package in ("notifications", "digest", "pipeline"):
        for path in (ROOT / package).rglob("*.py"):
            used |= set(re.findall(r'getLogger\("(sluice[^"]*)"\)', path.read_text()))
    assert used
    assert used <= set(LOGGERS)
