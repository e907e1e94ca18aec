"""The README and docs/integrate.md show how to install Sluice before it is published: from a checkout, or from the
wheel `make wheel` builds, beside the published name; the wheel's name there is the one the build makes."""

import fnmatch
import re
import tomllib

import pytest

from sluice_tools.processes import ROOT

PAGES = [ROOT / "README.md", ROOT / "docs" / "integrate.md"]


def commands(page):
    """The `pip install ...` lines of the page's shell blocks, without their comments."""
    blocks = re.findall(r"```sh\n(.*?)```", page.read_text(), re.S)
    return [line.split("#")[0].strip() for block in blocks for line in block.splitlines() if "pip install" in line]


def built_wheel_name():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    # The wheel's file name: the distribution's name normalised (PEP 427), its version, a pure-Python tag.
    return f"{re.sub(r'[-_.]+', '_', project['name'])}-{project['version']}-py3-none-any.whl"


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_the_page_installs_from_a_checkout_and_from_the_wheel_beside_the_published_name(page):
    shown = commands(page)
    assert "pip install /path/to/checkout" in shown, shown
    wheels = [c.split()[-1] for c in shown if c.endswith(".whl")]
    assert wheels, f"{page.name} shows no wheel to install: {shown}"
    assert all(fnmatch.fnmatch(f"/path/to/checkout/dist/{built_wheel_name()}", wheel) for wheel in wheels), wheels
    assert "pip install django-sluice" in shown
    assert "make wheel" in page.read_text()
    assert "not on the package index yet" in page.read_text()


def test_make_wheel_puts_the_wheel_where_the_pages_say():
    recipe = (ROOT / "Makefile").read_text().split("\nwheel:", 1)[1].split("\n\n", 1)[0]
    assert "--outdir dist" in recipe
