"""docs/configuration.md documents every setting the resolver reads and every variable Sluice's own project reads."""

import ast
import re

from sluice_tools.processes import ROOT

PAGE = ROOT / "docs" / "configuration.md"
# The helpers in settings/ that read one environment variable, named by their first argument.
READERS = {"get", "getenv", "_flag", "_list", "_env_json"}


def table_names(heading):
    """The backticked names in the first column of the table under a '## heading' of the page."""
    section = PAGE.read_text().split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]
    first_cells = [line.split("|")[1] for line in section.splitlines() if line.startswith("| `")]
    return {name for cell in first_cells for name in re.findall(r"`([A-Z][A-Z0-9_]*)", cell)}


def environment_reads(path):
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if func in READERS and isinstance(node.args[0].value, str):
                names.add(node.args[0].value)
        elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            if isinstance(node.value, ast.Attribute) and node.value.attr == "environ":
                names.add(node.slice.value)
    return {name for name in names if re.fullmatch(r"[A-Z][A-Z0-9_]+", name)}


def test_every_environment_variable_of_the_own_project_is_in_the_table():
    read = set().union(*(environment_reads(path) for path in sorted((ROOT / "settings").glob("*.py"))))
    assert {"DATABASE_URL", "DJANGO_DEBUG", "SLUICE_QUEUES"} <= read, "the scan of settings/ found too little"
    missing = sorted(read - table_names("Sluice's own project: environment variables"))
    assert not missing, f"docs/configuration.md's environment table lacks {missing}"


def test_every_setting_the_resolver_reads_is_in_the_table():
    modules = sorted((ROOT / "pipeline" / "conf").glob("*.py"))
    read = set().union(*(re.findall(r"\"(SLUICE_[A-Z_]+)\"", path.read_text()) for path in modules))
    assert {"SLUICE_REDIS_URL", "SLUICE_SITE_URL", "SLUICE_USER_LANGUAGE", "SLUICE_EMAIL"} <= read
    missing = sorted(read - table_names("Settings"))
    assert not missing, f"docs/configuration.md's settings table lacks {missing}"
