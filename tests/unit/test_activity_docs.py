"""docs/activity.md's table of SLUICE_ACTIVITY's keys says what the resolver takes, with its defaults."""

import re

from pipeline.conf.activity import DEFAULT_ACTIVITY
from sluice_tools.processes import ROOT


def test_the_settings_table_names_every_key_with_its_default():
    text = (ROOT / "docs" / "activity.md").read_text()
    section = text.split("| key of `SLUICE_ACTIVITY` |", 1)[1].split("\n\n", 1)[0]
    rows = dict(re.findall(r"^\| `(\w+)` \| `([^`]+)` \|", section, re.M))
    assert rows == {name: repr(value) for name, value in DEFAULT_ACTIVITY.items()}
