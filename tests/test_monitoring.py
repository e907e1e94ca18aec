"""The alert rules and the Flower config: rules use only metrics the exporter serves, and never raw depth."""

import os
import re
import subprocess
import sys

import pytest
import yaml
from django.core.exceptions import ImproperlyConfigured

from sluice_tools.processes import ROOT


def exported_names():
    """The metric names the exporter serves, scraped from its /metrics."""
    from pipeline.exporter import application

    body = b"".join(application(120)({"PATH_INFO": "/metrics", "REQUEST_METHOD": "GET"}, lambda *a: None))
    return set(re.findall(r"^# TYPE (sluice_[a-z_]+) (\w+)", body.decode(), re.M))


def test_alert_rules_use_exported_metrics_and_not_depth(redis_client):
    served = set()
    for name, kind in exported_names():
        served |= {name, f"{name}_total"} if kind == "counter" else {name, f"{name}_bucket", f"{name}_count"}
    rules = yaml.safe_load((ROOT / "monitoring" / "sluice-rules.yml").read_text())["groups"][0]["rules"]
    names = {r["alert"] for r in rules}
    assert {"SluiceDrainTimeOverBudget", "SluiceCriticalRejected", "SluiceDeadLettersDropped"} <= names
    for rule in rules:
        used = set(re.findall(r"sluice_[a-z_]+", rule["expr"]))
        assert used <= served, (rule["alert"], used - served)
        assert "sluice_queue_depth" not in used, rule["alert"]


@pytest.mark.parametrize(
    "command",
    [["-m", "celery", "-A", "pipeline", "flower"], [str(ROOT / "manage.py"), "flower"]],
    ids=["celery -A pipeline flower", "manage.py flower"],
)
@pytest.mark.parametrize("auth", [None, "", "admin:", ":secret"], ids=["unset", "empty", "no password", "no user"])
def test_flower_refuses_to_start_without_a_login_from_any_directory(tmp_path, command, auth):
    env = {k: v for k, v in os.environ.items() if k != "FLOWER_BASIC_AUTH"}
    env["PYTHONPATH"] = str(ROOT)
    env.setdefault("DJANGO_SETTINGS_MODULE", "settings")
    if auth is not None:
        env["FLOWER_BASIC_AUTH"] = auth
    done = subprocess.run(
        [sys.executable, *command, "--port=1"],
        cwd=tmp_path,  # not the project's folder: nothing there to read a config from
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert "Flower needs a login" in done.stdout + done.stderr


def test_flower_auth_rules():
    from pipeline.flower import refuse_without_auth

    refuse_without_auth([], {"FLOWER_BASIC_AUTH": "ops:pw"})
    refuse_without_auth(["--basic-auth=ops:pw"], {})
    refuse_without_auth(["--auth=.*@example.com"], {})
    with pytest.raises(ImproperlyConfigured):
        refuse_without_auth(["--basic-auth=ops:"], {"FLOWER_BASIC_AUTH": ""})
