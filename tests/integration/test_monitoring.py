"""The alert rules and the Flower config: rules use only metrics the exporter serves, and never raw depth."""

import os
import re
import subprocess
import sys
import time

import pytest
import yaml
from django.core.exceptions import ImproperlyConfigured

from sluice_tools.processes import ROOT


def exported_names():
    """The metric names the exporter serves, scraped from its /metrics."""
    from pipeline.observe.exporter import application

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
    from pipeline.broker.flower_auth import refuse_without_auth

    refuse_without_auth([], {"FLOWER_BASIC_AUTH": "ops:pw"})
    refuse_without_auth(["--basic-auth=ops:pw"], {})
    refuse_without_auth(["--auth=.*@example.com"], {})
    with pytest.raises(ImproperlyConfigured):
        refuse_without_auth(["--basic-auth=ops:"], {"FLOWER_BASIC_AUTH": ""})


# The rules file and the chart's PrometheusRule are two renderings of one set of alerts; these keep them one.

RANGE = re.compile(r"\[[^\]]*\]")
NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?![\w.])")
MATCHER = re.compile(r'(\w+)\s*(=~|!=|!~|=)\s*"([^"]*)"')


def signatures(rules):
    """Per alert: the metrics, label matchers (but namespace), numbers, ranges, ``for`` and severity it uses.

    The chart splits an alert by queue where the file writes one expression with ``or``, so rules of one name
    are taken together."""
    found = {}
    for rule in rules:
        expr = rule["expr"]
        entry = found.setdefault(
            rule["alert"],
            {"metrics": set(), "matchers": set(), "numbers": set(), "ranges": set(), "for": set(), "severity": set()},
        )
        entry["metrics"] |= set(re.findall(r"sluice_[a-z_]+", expr))
        entry["matchers"] |= {m for m in MATCHER.findall(expr) if m[0] != "namespace"}
        entry["ranges"] |= set(RANGE.findall(expr))
        entry["numbers"] |= {float(n) for n in NUMBER.findall(RANGE.sub("", expr))}
        entry["for"].add(rule.get("for"))
        entry["severity"].add(rule["labels"]["severity"])
    return found


def test_the_charts_prometheus_rule_is_the_rules_file():
    from tests.unit.test_chart import of_kind, render_objects

    (rule,) = of_kind(render_objects({"metrics": {"prometheusRule": {"enabled": True}}}), "PrometheusRule")
    shipped = signatures(r for group in rule["spec"]["groups"] for r in group["rules"])
    written = signatures(yaml.safe_load((ROOT / "monitoring" / "sluice-rules.yml").read_text())["groups"][0]["rules"])
    assert sorted(shipped) == sorted(written)
    for alert, signature in written.items():
        assert shipped[alert] == signature, alert
    # Every chart rule is scoped to the release's namespace, so two releases never alert on each other.
    for r in (r for group in rule["spec"]["groups"] for r in group["rules"]):
        assert all('namespace="notify"' in s for s in re.findall(r"sluice_[a-z_]+\{[^}]*\}", r["expr"])), r["expr"]


def test_a_rule_that_drifts_is_caught():
    rules = yaml.safe_load((ROOT / "monitoring" / "sluice-rules.yml").read_text())["groups"][0]["rules"]
    changed = [dict(r, expr=r["expr"].replace("> 5", "> 6")) for r in rules]
    assert signatures(changed) != signatures(rules)


def test_the_digest_flush_gauges(redis_client, settings, db):
    from digest.flush import run_flush
    from pipeline.broker.beat_schedule import record_running_interval
    from pipeline.observe.exporter import application

    settings.SLUICE_DIGEST = {"flush_interval_s": 30, "max_keys": 200}
    record_running_interval(45)  # what Sluice's beat runs, which /metrics reports (tests/test_flush_schedule.py)

    def scrape():
        body = b"".join(application(120)({"PATH_INFO": "/metrics", "REQUEST_METHOD": "GET"}, lambda *a: None))
        return body.decode()

    assert "sluice_digest_last_flush_timestamp_seconds{" not in scrape()  # no flush yet: no series, not a 0
    assert "sluice_digest_flush_interval_seconds 45.0" in scrape()
    before = time.time()
    run_flush("beat")
    run_flush("size")
    text = scrape()
    beat = float(re.search(r'sluice_digest_last_flush_timestamp_seconds\{trigger="beat"\} (\S+)', text)[1])
    assert before - 1 <= beat <= time.time() + 1
    assert 'sluice_digest_last_flush_timestamp_seconds{trigger="size"}' in text
    assert 'trigger="backlog"' not in text
