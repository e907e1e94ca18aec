"""Every management command Sluice ships, each of its subcommands and options, is documented for users."""

import ast
import re

import pytest

from sluice_tools.processes import ROOT

COMMANDS = sorted(
    path
    for package in ("pipeline", "notifications", "digest", "sluice_tools")
    for path in (ROOT / package / "management" / "commands").glob("[a-z]*.py")
)


def docs_text():
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "helm" / "sluice" / "README.md"]
    return "\n".join(page.read_text() for page in pages)


def declared(path):
    """The subcommands (add_parser) and long options (add_argument) a command's source declares.

    Read from the source rather than by loading the command: loading simulate_autoscale imports matplotlib,
    seconds of a unit test's budget on a loaded machine.
    """
    subcommands, options = [], []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
            first = node.args[0]
            if not (isinstance(first, ast.Constant) and isinstance(first.value, str)):
                continue
            if node.func.attr == "add_parser":
                subcommands.append(first.value)
            elif node.func.attr == "add_argument" and first.value.startswith("--"):
                options.append(first.value)
    return subcommands, options


def named(word, text):
    return re.search(rf"(?<![\w-]){re.escape(word)}(?![\w-])", text) is not None


@pytest.mark.parametrize("path", COMMANDS, ids=lambda path: path.stem)
def test_every_command_and_option_is_in_the_docs(path):
    text = docs_text()
    subcommands, options = declared(path)
    names = [f"{path.stem} {sub}" for sub in subcommands] or [path.stem]
    missing = [name for name in names if not named(name, text)]
    missing += [option for option in options if not named(option, text)]
    assert not missing, f"{path.stem}: not in README.md, docs/ or the chart's README: {missing}"


def test_the_source_reading_sees_subcommands_and_options():
    subcommands, options = declared(ROOT / "sluice_tools" / "management" / "commands" / "bench.py")
    assert {"admission", "cost", "preferences"} <= set(subcommands)
    assert {"--choices", "--producers", "--json"} <= set(options)
    assert len(COMMANDS) >= 8
