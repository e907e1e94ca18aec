"""The alert rules and the Flower config: rules use only metrics the exporter serves, and never raw depth."""

import os
import re
import subprocess
import sys
from pathlib import Path

import yaml

from pipeline.processes import ROOT

EXPORTED = {
    "sluice_queue_depth",
    "sluice_queue_capacity",
    "sluice_queue_latency_seconds",
    "sluice_queue_latency_window_seconds",
    "sluice_drain_time_seconds",
    "sluice_notifications_total",
    "sluice_sent_total",
    "sluice_send_duration_seconds",
    "sluice_digest_pending_keys",
    "sluice_digest_flushes_total",
}


def test_alert_rules_use_exported_metrics_and_not_depth():
    rules = yaml.safe_load((ROOT / "monitoring" / "sluice-rules.yml").read_text())["groups"][0]["rules"]
    names = {r["alert"] for r in rules}
    assert {"SluiceDrainTimeOverBudget", "SluiceCriticalRejected"} <= names
    for rule in rules:
        used = set(re.findall(r"sluice_[a-z_]+", rule["expr"]))
        assert used <= EXPORTED, rule["alert"]
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
