"""A command started without what it needs ends in one line that names the fix, not in a traceback."""

import os
import subprocess
import sys

import pytest

from sluice_tools.processes import ROOT


@pytest.mark.parametrize(
    ("command", "env", "words"),
    [
        (
            [str(ROOT / "manage.py"), "flower", "--port=1"],
            {"DJANGO_SETTINGS_MODULE": "settings"},
            "CommandError: Flower needs a login: set FLOWER_BASIC_AUTH",
        ),
        (
            ["-m", "celery", "-A", "pipeline", "flower", "--port=1"],
            {"DJANGO_SETTINGS_MODULE": "settings"},
            "ImproperlyConfigured: Flower needs a login: set FLOWER_BASIC_AUTH",
        ),
        (
            ["-m", "celery", "-A", "pipeline", "beat"],
            {},
            "ImproperlyConfigured: Sluice's Celery app runs with your project's settings and never guesses them: set "
            "DJANGO_SETTINGS_MODULE",
        ),
    ],
    ids=["manage.py flower without a login", "celery flower without a login", "celery beat without settings"],
)
def test_one_line_naming_the_fix(tmp_path, command, env, words):
    base = {k: v for k, v in os.environ.items() if k not in ("FLOWER_BASIC_AUTH", "DJANGO_SETTINGS_MODULE")}
    done = subprocess.run(
        [sys.executable, *command],
        cwd=tmp_path,
        env={**base, "PYTHONPATH": str(ROOT), "DJANGO_DEBUG": "1", **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [done.stderr.strip()]  # one line
    assert done.stderr.startswith(words)
