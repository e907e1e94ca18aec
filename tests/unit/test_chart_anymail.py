"""The chart carries anymail's secrets (the ESPs' webhook secret and signing keys) in its Secret, to every pod."""

import base64

import helm_python as helm
import pytest

from tests.unit.test_chart import FULLNAME, named, pod_specs, render_objects

ANYMAIL = {"WEBHOOK_SECRET": "hooks:correct-horse", "MAILGUN_WEBHOOK_SIGNING_KEY": "key-1"}


def test_anymails_secrets_go_into_the_secret_and_every_container():
    objects = render_objects({"secrets": {"anymail": ANYMAIL}})
    data = named(objects, "Secret", f"{FULLNAME}-secrets")["data"]
    for name, value in ANYMAIL.items():
        assert base64.b64decode(data[f"ANYMAIL_{name}"]).decode() == value
    for pod, spec in pod_specs(objects):
        for container in spec["containers"]:
            env = {e["name"]: e for e in container.get("env", [])}
            for name in ANYMAIL:
                assert env[f"ANYMAIL_{name}"]["valueFrom"]["secretKeyRef"]["key"] == f"ANYMAIL_{name}", pod


def test_an_anymail_setting_with_a_bad_name_is_refused():
    with pytest.raises(helm.HelmError, match="webhook-secret"):
        render_objects({"secrets": {"anymail": {"webhook-secret": "x"}}})
