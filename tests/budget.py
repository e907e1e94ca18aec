"""The time budget of the fast tiers: under CI, a unit or integration test whose call takes over BUDGET_S fails."""

import os

import pytest

#: Seconds a test's call phase (not its fixtures' set-up) may take in tests/unit and tests/integration.
BUDGET_S = 10.0


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Turn a passing call over the budget into a failure that says what to do, when CI=true.

    Imported by the conftest.py of each fast tier, so pytest applies it to that tier's tests only.
    """
    outcome = yield
    report = outcome.get_result()
    if call.when != "call" or not report.passed or os.environ.get("CI") != "true":
        return
    if call.duration > BUDGET_S:
        report.outcome = "failed"
        report.longrepr = (
            f"{item.nodeid} took {call.duration:.1f} s, over the {BUDGET_S:g} s budget of the unit and "
            "integration tiers: move it to tests/system or make it faster (docs/testing.md)"
        )
