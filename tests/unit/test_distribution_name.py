"""The distribution is django-sluice everywhere a user meets its name: pyproject, the docs, the image, the chart."""

import re
import tomllib

import yaml

from sluice_tools.processes import ROOT

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")), ROOT / "helm" / "sluice" / "README.md"]


def project():
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def test_the_distribution_is_django_sluice_and_its_extras_say_so():
    meta = project()
    assert meta["name"] == "django-sluice"
    assert "django-sluice[bench]" in meta["optional-dependencies"]["dev"]


def test_no_doc_installs_the_other_projects_sluice():
    # `pip install sluice` gets an unrelated project from the package index; a wheel named sluice-* is gone.
    wrong = re.compile(r"pip install [\"']?sluice\b|(?<![\w-])sluice(-\d|\[|==)")
    offenders = [(path.name, line) for path in DOCS for line in path.read_text().splitlines() if wrong.search(line)]
    assert not offenders
    assert "pip install django-sluice" in (ROOT / "docs" / "integrate.md").read_text()


def test_the_image_and_the_chart_carry_the_distributions_name_and_version():
    version = project()["version"]
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert 'org.opencontainers.image.title="django-sluice"' in dockerfile
    assert f'org.opencontainers.image.version="{version}"' in dockerfile
    chart = yaml.safe_load((ROOT / "helm" / "sluice" / "Chart.yaml").read_text())
    assert chart["appVersion"] == version
    assert "django-sluice" in chart["description"]


def test_make_wheel_builds_without_the_development_lock():
    makefile = (ROOT / "Makefile").read_text()
    [recipe] = re.findall(r"^wheel: (.*)$", makefile, flags=re.M)
    assert recipe.strip() == "$(BUILD_STAMP)"
    build = (ROOT / "requirements-build.txt").read_text().splitlines()
    pinned = [line for line in build if line and not line.startswith("#")]
    assert all("==" in line for line in pinned)
    assert {line.split("==")[0] for line in pinned} == {"build", "packaging", "pyproject_hooks", "setuptools"}


def test_the_classifiers_list_both_django_lines():
    classifiers = project()["classifiers"]
    assert {"Framework :: Django :: 5.2", "Framework :: Django :: 6.0"} <= set(classifiers)
