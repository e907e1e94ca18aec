"""tests/unit: no server, or one Redis; no workers. Each test stays within the 10 s budget (tests/budget.py)."""

from tests.budget import pytest_runtest_call, pytest_runtest_makereport  # noqa: F401  (pytest takes the hooks from here)
