"""The fast tiers' budget (tests/budget.py): under CI=true a test whose call runs past it fails, saying what to do."""

import os
import subprocess
import sys

from sluice_tools.processes import ROOT

# A tier of its own, with the budget's hooks and a tiny budget, run by pytest in a subprocess.
TIER_CONFTEST = """
from tests import budget
from tests.budget import pytest_runtest_call, pytest_runtest_makereport  # noqa: F401

# Small enough that the budget stays under the slow test's 0.3 s even at a load of 20 per core.
budget.BUDGET_S = 0.01
"""
TIER_TESTS = """
import time

def test_slow():
    time.sleep(0.3)  # longer than the tier's budget: the test is about time

def test_fast():
    pass
"""


def run_tier(tmp_path, ci):
    (tmp_path / "conftest.py").write_text(TIER_CONFTEST)
    (tmp_path / "test_tier.py").write_text(TIER_TESTS)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CI": "true" if ci else ""}
    plugins = ["-p", "no:django", "-p", "no:xdist", "-p", "no:cacheprovider"]
    args = [sys.executable, "-m", "pytest", "-q", "-rf", "-c", os.devnull, "--rootdir", str(tmp_path), *plugins]
    return subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)


def test_under_ci_a_test_over_the_budget_fails_saying_to_move_it(tmp_path):
    done = run_tier(tmp_path, ci=True)
    assert "1 failed, 1 passed" in done.stdout, done.stdout + done.stderr
    assert "test_tier.py::test_slow took 0." in done.stdout
    assert "s budget of the unit and integration tiers (0.01 s, times a load of" in done.stdout
    assert "per core past 1): move it to tests/system" in done.stdout


def test_outside_ci_the_budget_fails_nothing(tmp_path):
    done = run_tier(tmp_path, ci=False)
    assert "2 passed" in done.stdout, done.stdout + done.stderr
