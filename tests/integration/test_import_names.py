"""Sluice's import names (notifications, digest, pipeline) are checked: a host package that shadows one is sluice.E005,
and docs/integrate.md's table of check ids lists exactly the ids the code reports."""

import os
import re
import subprocess
import sys

import pytest

from sluice_tools.processes import ROOT

HOST_APP = """
from django.apps import AppConfig


class {cls}(AppConfig):
    name = "{name}"
"""


@pytest.mark.parametrize("name", ["notifications", "digest"])
def test_a_host_package_that_shadows_sluices_is_named_with_the_fix(tmp_path, name):
    # A host's own app, made before Sluice was installed (startapp refuses the name once Sluice is there).
    (tmp_path / name).mkdir()
    (tmp_path / name / "__init__.py").write_text("")
    (tmp_path / name / "apps.py").write_text(HOST_APP.format(cls=name.title() + "Config", name=name))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DJANGO_SETTINGS_MODULE": "settings", "DJANGO_DEBUG": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "django", "check"],
        cwd=tmp_path,  # the host's folder comes first on sys.path, as a host's manage.py puts it
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert f"sluice.E005: the import name '{name}' resolves to {tmp_path / name}, not to Sluice's" in last
    assert f"Rename your package '{name}'" in last


def test_sluices_own_packages_pass():
    from pipeline.host_checks import check_import_names

    assert check_import_names() == []


def reported_ids():
    """Every check id the code can report (the id= of each Error and Warning in Sluice's packages)."""
    found = set()
    for package in ("notifications", "digest", "pipeline"):
        for path in (ROOT / package).rglob("*.py"):
            found |= set(re.findall(r'id="(sluice\.[EW]\d{3})"', path.read_text()))
    return found


def test_the_check_table_in_integrate_md_lists_exactly_the_reported_ids():
    text = (ROOT / "docs" / "integrate.md").read_text()
    table = text[text.index("## What `check` tells you") :]
    documented = re.findall(r"^\| `(sluice\.[EW]\d{3})` \|", table, flags=re.M)
    assert len(documented) == len(set(documented))
    assert set(documented) == reported_ids()
