"""The time budget of the fast tiers: under CI, a unit or integration test whose call takes over its budget fails.

The budget is BUDGET_S on a machine with a core to spare, and grows with the machine's load per core: CI runs the
system tier's worker kills beside these tiers on two shared cores, where a 2 s test was measured at 14 s. A test that
belongs in the system tier takes minutes, and still fails.
"""

import os

import pytest

#: Seconds a test's call phase (not its fixtures' set-up) may take in tests/unit and tests/integration on an idle
#: machine.
BUDGET_S = 10.0


def budget_s(load_per_core):
    """The budget at ``load_per_core`` (the 1-minute load average over the cores): BUDGET_S, times the load past 1."""
    return BUDGET_S * max(1.0, load_per_core)


def _load_per_core():
    return os.getloadavg()[0] / (os.cpu_count() or 1)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    item.sluice_load_at_start = _load_per_core()
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Turn a passing call over the budget into a failure that says what to do, when CI=true.

    Imported by the conftest.py of each fast tier, so pytest applies it to that tier's tests only.
    """
    outcome = yield
    report = outcome.get_result()
    if call.when != "call" or not report.passed or os.environ.get("CI") != "true":
        return
    load = max(getattr(item, "sluice_load_at_start", 0.0), _load_per_core())
    budget = budget_s(load)
    if call.duration > budget:
        report.outcome = "failed"
        report.longrepr = (
            f"{item.nodeid} took {call.duration:.1f} s, over the {budget:.3g} s budget of the unit and "
            f"integration tiers ({BUDGET_S:g} s, times a load of {load:.1f} per core past 1): "
            "move it to tests/system or make it faster (docs/testing.md)"
        )
