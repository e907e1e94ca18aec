"""Every relative link, image and path the user-facing docs name resolves to a file inside the repository."""

import re

import pytest

from sluice_tools.processes import ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")), ROOT / "helm" / "sluice" / "README.md"]

# [text](target) and ![alt](target); a target may carry a "title" after a space.
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
# A path written in prose or code from the repository's root, e.g. `docs/reports/bench-cost.json`: these were the
# ones a move of the generated reports left stale, and no markdown renderer would flag them.
ROOT_PATH = re.compile(r"(?<![\w./-])(docs/[\w./-]*\w\.(?:md|json|png|svg))")
EXTERNAL = ("http://", "https://", "mailto:")


def relative_targets(text):
    for target in LINK.findall(text):
        if target.startswith(EXTERNAL) or target.startswith("#"):
            continue
        yield target.split("#", 1)[0]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_and_image_resolves_inside_the_repository(page):
    broken = []
    for target in relative_targets(page.read_text()):
        resolved = (page.parent / target).resolve()
        # A link out of the repository works on one checkout only: a user's copy has nothing there.
        if not resolved.is_relative_to(ROOT.resolve()) or not resolved.exists():
            broken.append(target)
    assert not broken, f"{page.relative_to(ROOT)} links to missing files: {broken}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_docs_path_named_in_the_text_exists(page):
    missing = sorted({path for path in ROOT_PATH.findall(page.read_text()) if not (ROOT / path).exists()})
    assert not missing, f"{page.relative_to(ROOT)} names files that do not exist: {missing}"


def test_the_link_pattern_sees_links_images_and_anchors():
    text = "[a](docs/x.md#part) ![p](plots/y.png) [w](https://example.com) [s](#local)"
    assert list(relative_targets(text)) == ["docs/x.md", "plots/y.png"]
    named = ROOT_PATH.findall("see `docs/reports/bench.json`, and docs/a.md.")
    assert named == ["docs/reports/bench.json", "docs/a.md"]
