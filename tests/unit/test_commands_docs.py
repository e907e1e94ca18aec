"""Every management command Sluice ships, each of its subcommands and options, is documented for users."""

import argparse
import re

import pytest
from django.core.management import load_command_class
from django.core.management.base import BaseCommand

from sluice_tools.processes import ROOT

COMMANDS = {
    "pipeline": ["capacity", "deadletters", "flower", "pipeline_exporter", "worker"],
    "sluice_tools": ["bench", "demo", "simulate_autoscale"],
}


def docs_text():
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "helm" / "sluice" / "README.md"]
    return "\n".join(page.read_text() for page in pages)


def own_options(parser):
    # Django's options on every command (--settings, --verbosity, ...) are Django's to document.
    django = set(BaseCommand().create_parser("manage.py", "any")._option_string_actions)
    return {
        option
        for action in parser._actions
        if not isinstance(action, argparse._SubParsersAction)
        for option in action.option_strings
        if option.startswith("--") and option not in django
    }


def commands(app, name):
    parser = load_command_class(app, name).create_parser("manage.py", name)
    subs = [action for action in parser._actions if isinstance(action, argparse._SubParsersAction)]
    if not subs:
        return {name: own_options(parser)}
    return {f"{name} {sub}": own_options(subparser) for sub, subparser in subs[0].choices.items()}


def named(word, text):
    return re.search(rf"(?<![\w-]){re.escape(word)}(?![\w-])", text) is not None


@pytest.mark.parametrize(("app", "name"), [(app, name) for app, names in COMMANDS.items() for name in names])
def test_every_command_and_option_is_in_the_docs(app, name):
    text = docs_text()
    missing = []
    for command, options in commands(app, name).items():
        if not named(command, text):
            missing.append(command)
        missing += [f"{command} {option}" for option in sorted(options) if not named(option, text)]
    assert not missing, f"not in README.md, docs/ or the chart's README: {missing}"
