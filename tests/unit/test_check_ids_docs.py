"""docs/integrate.md's table of check ids is the code's: every id a check reports is there, and nothing else."""

import re

from sluice_tools.processes import ROOT

PACKAGES = ("notifications", "digest", "pipeline")
CHECK_ID = re.compile(r"""id=["'](sluice\.[EW]\d{3})["']""")


def ids_in_code():
    found = set()
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            found.update(CHECK_ID.findall(path.read_text()))
    return found


def ids_in_docs():
    text = (ROOT / "docs" / "integrate.md").read_text()
    return set(re.findall(r"^\| `(sluice\.[EW]\d{3})` \|", text, re.M))


def test_every_check_id_is_in_the_docs_table_and_only_those():
    code = ids_in_code()
    assert {"sluice.E001", "sluice.E008"} <= code, "the source reading finds the checks"
    assert ids_in_docs() == code
