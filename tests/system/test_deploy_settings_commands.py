"""manage.py check --deploy with the chart's settings; the public development key refused (subprocesses)."""

from tests.integration.test_deploy_settings import (
    chart_environment,
    manage,
)


def test_check_deploy_has_no_warnings_with_the_charts_settings():
    env = chart_environment()
    assert env["DJANGO_SETTINGS_MODULE"] == "settings"
    assert len(env["DJANGO_SECRET_KEY"]) >= 50
    done = manage(env, "check", "--deploy", "--fail-level", "WARNING")
    print(done.stdout, done.stderr)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "System check identified no issues (0 silenced)." in done.stdout


def test_the_public_development_key_is_refused_unless_debug_is_on():
    env = {**chart_environment(), "DJANGO_SECRET_KEY": ""}
    refused = manage(env, "check")
    assert refused.returncode != 0
    assert "DJANGO_SECRET_KEY is not set, and DEBUG is off" in refused.stderr
    assert manage({**env, "DJANGO_DEBUG": "1"}, "check").returncode == 0
