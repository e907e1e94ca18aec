"""Sluice's own strings ship in Russian: every entry of each app's .po is translated, the compiled .mo shipped beside
it says the same, the .po holds every string of the sources (when GNU gettext is here to extract them), and the
plural forms are Russian's four."""

import gettext
import shutil
import subprocess
import sys

import pytest
from django.utils import translation

from sluice_tools.processes import ROOT
from tests.conftest import need
from tests.po_files import entries

APPS = ("notifications", "digest")


def catalog(app):
    return ROOT / app / "locale" / "ru" / "LC_MESSAGES"


@pytest.mark.parametrize("app", APPS)
def test_every_string_is_translated_and_the_mo_says_what_the_po_says(app):
    found = entries((catalog(app) / "django.po").read_text())
    assert len(found) > 10
    untranslated = [msgid for (_context, msgid), (forms, fuzzy) in found.items() if fuzzy or not all(forms)]
    assert not untranslated, f"{app}: untranslated or fuzzy entries: {untranslated[:5]}"
    with open(catalog(app) / "django.mo", "rb") as mo:
        compiled = gettext.GNUTranslations(mo)
    for (context, msgid), (forms, _fuzzy) in found.items():
        assert context is None  # Sluice uses no contexts; a lookup with one would need pgettext here
        if len(forms) == 1:
            assert compiled.gettext(msgid) == forms[0], f"{app}: the .mo is stale: run make compilemessages"
        else:
            # 1, 2, 5 and 0.5 pick Russian's four forms.
            shown = [compiled.ngettext(msgid, "-", n) for n in (1, 2, 5)]
            assert shown == list(forms[:3]), f"{app}: the .mo is stale for {msgid!r}: run make compilemessages"
    assert len(compiled._catalog) == len(found) + 1 + sum(len(f) - 1 for f, _ in found.values())  # + the header


@pytest.mark.parametrize("app", APPS)
def test_the_po_holds_every_string_of_the_sources(app, tmp_path):
    if not shutil.which("xgettext") or not shutil.which("msgmerge"):
        need("GNU gettext (apt-get install -y gettext) to extract the strings")
    copy = tmp_path / app
    shutil.copytree(ROOT / app, copy, ignore=shutil.ignore_patterns("__pycache__", "*.mo"))
    command = [sys.executable, "-m", "django", "makemessages", "-l", "ru", "--add-location", "file", "-v", "0"]
    subprocess.run(command, cwd=copy, check=True, timeout=60, env={"PATH": "/usr/bin:/bin"}, capture_output=True)
    fresh = entries((copy / "locale" / "ru" / "LC_MESSAGES" / "django.po").read_text())
    committed = entries((catalog(app) / "django.po").read_text())
    assert set(fresh) == set(committed), f"{app}: its .po is not the sources' strings: run make messages"


def test_russian_plural_forms_for_1_2_5_and_21():
    with translation.override("ru"):
        shown = [
            translation.ngettext("%(counter)s update", "%(counter)s updates", n) % {"counter": n}
            for n in (1, 2, 5, 21, 11, 112)
        ]
    assert shown == ["1 обновление", "2 обновления", "5 обновлений", "21 обновление", "11 обновлений", "112 обновлений"]
