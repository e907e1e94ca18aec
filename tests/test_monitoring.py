"""The alert rules and the Flower config: rules use only metrics the exporter serves, and never raw depth."""

import os
import re
import subprocess
import sys
from pathlib import Path

import yaml

from pipeline.processes import ROOT


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


def test_flower_refuses_to_start_without_basic_auth():
    env = {k: v for k, v in os.environ.items() if k != "FLOWER_BASIC_AUTH"}
    done = subprocess.run(
        [sys.executable, "-m", "celery", "-A", "pipeline", "flower", "--port=1"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert "FLOWER_BASIC_AUTH is not set" in done.stdout + done.stderr
    assert Path(ROOT / "flowerconfig.py").exists()
