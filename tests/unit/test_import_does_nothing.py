"""Importing Sluice does nothing: no Celery app built, no setting read, no receiver connected, no hook loaded.

Each check runs in a child interpreter with a clean environment (no DJANGO_SETTINGS_MODULE), because the test
process itself has long been set up. A module that defines or imports Django models cannot be imported before
Django's apps are loaded, whatever Sluice does, nor can a migration; every other module must import with no settings
at all.
"""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from sluice_tools.processes import ROOT

PACKAGES = ("pipeline", "digest", "notifications")

# Imports every module of the packages with settings unconfigured, counting the settings each import asks for
# (Django's LazySettings._setup runs on any read of unconfigured settings), and the Celery apps and receivers
# that exist afterwards.
IMPORT_ALL = """
import importlib, json, pkgutil, sys
import celery._state, celery.signals, django.conf
from celery.utils.dispatch.signal import Signal

reads = []
setup = django.conf.LazySettings._setup
def counting(self, name=None):
    reads.append(name)
    return setup(self, name)
django.conf.LazySettings._setup = counting

clean, failed = {}, {}
for root in sys.argv[1:]:
    for info in [None, *pkgutil.walk_packages(importlib.import_module(root).__path__, root + ".")]:
        name = info.name if info else root
        if ".migrations." in name:
            continue  # Django's to load, with the project's settings, for migrate
        del reads[:]
        try:
            importlib.import_module(name)
        except Exception as exc:
            failed[name] = f"{type(exc).__name__}: {exc}"
        else:
            clean[name] = list(reads)

def ours(receiver):
    weak = type(receiver).__name__ in ("ReferenceType", "WeakMethod")
    found = receiver() if weak else receiver
    return getattr(found, "__module__", "").split(".")[0] in sys.argv[1:]

receivers = sorted(
    f"{name}: {receiver}"
    for name, signal in vars(celery.signals).items() if isinstance(signal, Signal)
    for _, receiver in signal.receivers if ours(receiver)
)
found = {
    "clean": clean, "apps": [app.main for app in celery._state._apps],
    "default_app": celery._state.default_app is not None, "configured": django.conf.settings.configured,
    "receivers": receivers,
}

# The modules that failed, imported again with settings configured but Django's apps not loaded: each must now fail
# only because it needs the app registry (it defines or imports models).
from django.core.exceptions import AppRegistryNotReady
django.conf.settings.configure()
for name in list(failed):
    try:
        importlib.import_module(name)
    except AppRegistryNotReady:
        continue
    except Exception as exc:
        failed[name] = f"{failed[name]}; with settings: {type(exc).__name__}: {exc}"
    else:
        failed[name] += "; with settings: imported"
    found.setdefault("not_for_models", {})[name] = failed[name]
print(json.dumps({**found, "needs_models": sorted(failed)}))
"""


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE" and not k.startswith("SLUICE_")}
    return {**env, "PYTHONPATH": str(ROOT), **extra}


def run_python(code, *args, env=None, check=True):
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        cwd=ROOT,
        env=env or clean_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    if check:
        assert done.returncode == 0, done.stderr[-3000:]
    return done


def test_every_module_imports_without_settings_and_builds_nothing():
    found = json.loads(run_python(IMPORT_ALL, *PACKAGES).stdout)
    assert {
        "pipeline.redis.keys",
        "pipeline.conf",
        "pipeline.celery",
        "pipeline.broker.transport",
        "digest",
        "notifications",
    } <= (found["clean"].keys()), found.get("not_for_models")
    assert found.get("not_for_models", {}) == {}  # what failed without settings needs Django's models, nothing else
    assert {name: read for name, read in found["clean"].items() if read} == {}  # no setting read
    assert found["apps"] == []  # no Celery app, Sluice's
    assert not found["default_app"]  # nor a default one
    assert found["receivers"] == []  # no Celery signal receiver of Sluice's connected
    assert not found["configured"]
    assert len(found["clean"]) > len(found["needs_models"])


def test_the_apps_declare_their_tasks_and_the_app_is_built_on_first_use():
    done = run_python(
        """
        import json, django, celery._state
        django.setup()  # the apps' ready() import their task modules
        before = [app.main for app in celery._state._apps]
        import pipeline
        tasks = sorted(name for name in pipeline.app.tasks if name.startswith("sluice."))
        print(json.dumps([before, tasks, pipeline.app is pipeline.celery.get_app()]))
        """,
        env=clean_env(DJANGO_SETTINGS_MODULE="tests.settings"),
    )
    before, tasks, same = json.loads(done.stdout)
    assert before == []
    assert tasks == [
        "sluice.activity.drain",
        "sluice.activity.prune",
        "sluice.delivery.prune",
        "sluice.digest.flush",
        "sluice.inbox.escalate",
        "sluice.inbox.escalate_step",
        "sluice.inbox.prune",
        "sluice.overflow.drain",
        "sluice.send.background",
        "sluice.send.critical",
        "sluice.send.routine",
        "sluice.topics.fanout_step",
        "sluice.topics.tick",
    ]
    assert same


def test_the_app_without_settings_raises_naming_the_fix():
    done = run_python("import pipeline; pipeline.app", check=False)
    assert done.returncode != 0
    assert (
        done.stderr.strip()
        .splitlines()[-1]
        .startswith(
            "django.core.exceptions.ImproperlyConfigured: Sluice's Celery app runs with your project's settings"
        )
    )


@pytest.mark.parametrize(
    "command",
    [["worker", "-Q", "critical"], ["inspect", "ping"]],
    ids=["worker", "inspect"],
)
def test_the_celery_command_without_settings_says_so_in_one_line(tmp_path, command):
    done = subprocess.run(
        [sys.executable, "-m", "celery", "-A", "pipeline", *command],
        cwd=tmp_path,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert done.stderr.strip().splitlines() == [
        "ImproperlyConfigured: Sluice's Celery app runs with your project's settings and never guesses them: set "
        "DJANGO_SETTINGS_MODULE, for example DJANGO_SETTINGS_MODULE=mysite.settings celery -A pipeline worker"
    ]
