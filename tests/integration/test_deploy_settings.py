"""Sluice's own project in production: `check --deploy` is clean with the chart's settings, and the public
development key is refused."""

import base64
import os
import subprocess
import sys

import pytest

from sluice_tools.processes import ROOT
from tests.unit.test_chart import of_kind, render_objects


def chart_environment():
    """The environment the chart gives every container: its ConfigMap and its Secret."""
    objects = render_objects()
    config = of_kind(objects, "ConfigMap")[0]["data"]
    secret = {k: base64.b64decode(v).decode() for k, v in of_kind(objects, "Secret")[0]["data"].items()}
    return {"PATH": os.environ["PATH"], **config, **secret}


def manage(env, *args):
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


def test_passwords_are_validated(settings):
    from django.contrib.auth.password_validation import validate_password
    from django.core.exceptions import ValidationError

    assert len(settings.AUTH_PASSWORD_VALIDATORS) == 4
    for weak in ("password", "12345678901234", "short"):
        with pytest.raises(ValidationError):
            validate_password(weak)
    validate_password("correct horse battery staple")
