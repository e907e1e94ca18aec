"""Settings: one resolver, ImproperlyConfigured naming the setting, and system checks."""

import pytest
from django.core.checks import run_checks
from django.core.exceptions import ImproperlyConfigured

from pipeline.broker.queues import celery_queue_settings
from pipeline.conf import sluice_settings


def test_defaults_are_valid():
    conf = sluice_settings()
    assert {k: q.capacity for k, q in conf.queues.items()} == {"critical": 2048, "routine": 2048, "background": 2048}
    assert conf.queues["critical"].wait_ms == 250
    assert conf.kinds["meeting.reminder"].klass == "critical"
    assert conf.kinds["task.due_changed"].klass == "routine"
    assert conf.kinds["meeting.participant_left"].klass == "background"
    assert conf.max_payload_bytes == 16 * 1024


@pytest.mark.parametrize(
    ("name", "value", "words"),
    [
        ("SLUICE_QUEUES", {"critical": {"capacity": 0}}, r"SLUICE_QUEUES\['critical'\]\['capacity'\] must be"),
        ("SLUICE_QUEUES", {"routine": {"capacity": "10"}}, r"SLUICE_QUEUES\['routine'\]\['capacity'\]"),
        ("SLUICE_QUEUES", {"critical": {"wait_ms": -1}}, r"\['wait_ms'\] must be an integer >= 0"),
        ("SLUICE_QUEUES", {"urgent": {}}, "unknown classes"),
        ("SLUICE_QUEUES", {"routine": {"capacity": 10, "ceiling": 5}}, r"\['ceiling'\] \(5\) must be >="),
        ("SLUICE_QUEUES", {"routine": {"queue": "celery"}}, r"\['queue'\] must be"),
        ("SLUICE_QUEUES", [], "SLUICE_QUEUES must be a dict"),
        ("SLUICE_KINDS", {"x.y": {"class": "urgent", "channels": ["email"]}}, r"SLUICE_KINDS\['x.y'\]\['class'\]"),
        ("SLUICE_KINDS", {"x.y": {"class": "routine", "channels": ["fax"]}}, "not in SLUICE_CHANNELS"),
        ("SLUICE_CHANNELS", {"email": {"backend": "no.such.Backend"}}, "cannot be imported"),
        ("SLUICE_MAX_PAYLOAD_BYTES", 0, "SLUICE_MAX_PAYLOAD_BYTES must be"),
        ("SLUICE_DIGEST", {"max_keys": 0}, r"SLUICE_DIGEST\['max_keys'\]"),
        ("SLUICE_QUEUES", {"routine": {"redis_url": "http://x"}}, r"SLUICE_QUEUES\['routine'\]\['redis_url'\] must be"),
        ("SLUICE_QUEUES", {"critical": {"redis_url": 6379}}, r"SLUICE_QUEUES\['critical'\]\['redis_url'\] must be"),
        (
            "SLUICE_QUEUES",
            {"critical": {"redis_url": "redis://h:port/0"}},
            r"\['critical'\]\['redis_url'\] is not a valid",
        ),
        ("SLUICE_QUEUES", {"background": {"redis_url": "redis://h/0", "redis": 1}}, "unknown keys \\['redis'\\]"),
        ("SLUICE_DIGEST", {"redis_url": "http://h/1"}, r"SLUICE_DIGEST\['redis_url'\] must be"),
        ("SLUICE_REDIS_URL", "localhost:6379", "SLUICE_REDIS_URL must be a redis://"),
    ],
)
def test_bad_setting_names_itself(settings, name, value, words):
    setattr(settings, name, value)
    with pytest.raises(ImproperlyConfigured, match=words):
        sluice_settings()
    errors = [e for e in run_checks() if e.id == "sluice.E001"]
    assert len(errors) == 1
    assert name in errors[0].msg


def test_a_project_declares_its_kinds_and_gets_no_others(settings):
    settings.SLUICE_KINDS = {"invoice.paid": {"class": "routine", "channels": ["email"]}}
    kinds = sluice_settings().kinds
    assert kinds["invoice.paid"].template == "sluice/invoice_paid.txt"
    assert kinds["invoice.paid"].digest_template == "sluice/digest/invoice_paid.txt"
    assert set(kinds) == {"invoice.paid"}  # the demo's kinds are the demo's, not a default


def test_no_redis_url_is_an_error_naming_the_setting(settings):
    del settings.SLUICE_REDIS_URL
    with pytest.raises(ImproperlyConfigured, match="SLUICE_REDIS_URL is not set"):
        sluice_settings()
    [error] = [e for e in run_checks() if e.id == "sluice.E001"]
    assert "SLUICE_REDIS_URL" in error.msg


@pytest.mark.parametrize("key", ["broker_url", "task_create_missing_queues", "beat_scheduler", "broker_transport"])
def test_sluice_celery_cannot_change_what_sluice_owns(settings, key):
    settings.SLUICE_CELERY = {key: "x"}
    [error] = [e for e in run_checks() if e.id == "sluice.E001"]
    assert f"SLUICE_CELERY[{key!r}] cannot be changed" in error.msg


def test_a_host_beat_on_the_plain_database_scheduler_is_an_error(settings):
    settings.CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
    [error] = [e for e in run_checks() if e.id == "sluice.E003"]
    assert "pipeline.beat:HostDatabaseScheduler" in error.hint
    settings.CELERY_BEAT_SCHEDULER = "pipeline.beat:HostDatabaseScheduler"
    assert not [e for e in run_checks() if e.id == "sluice.E003"]


def test_environment_json_is_read(monkeypatch):
    from settings.sluice import _env_json

    monkeypatch.setenv("SLUICE_QUEUES", '{"routine": {"capacity": 5}}')
    assert _env_json("SLUICE_QUEUES", {}) == {"routine": {"capacity": 5}}
    monkeypatch.setenv("SLUICE_QUEUES", "{nope")
    with pytest.raises(ImproperlyConfigured, match="SLUICE_QUEUES in the environment is not valid JSON"):
        _env_json("SLUICE_QUEUES", {})


def test_exactly_three_queues_and_routing_is_data():
    conf = celery_queue_settings()
    assert [q.name for q in conf["task_queues"]] == ["critical", "routine", "background"]
    assert conf["task_default_queue"] != "celery"
    assert conf["task_routes"]["sluice.send.critical"] == {"queue": "critical"}


def test_backend_that_cannot_be_built_is_a_check_error(settings):
    settings.SLUICE_CHANNELS = {
        "email": {"backend": "notifications.channels.webhook.WebhookChannel"},
        "push": {"backend": "notifications.channels.console.ConsoleChannel"},
        "sms": {"backend": "notifications.channels.console.ConsoleChannel"},
    }
    errors = [e for e in run_checks() if e.id == "sluice.E002"]
    assert len(errors) == 1
    assert "url" in errors[0].msg


def test_each_class_has_a_redis_url_defaulting_to_sluice_redis_url(settings):
    settings.SLUICE_REDIS_URL = "redis://main:6379/0"
    settings.SLUICE_QUEUES = {"critical": {"redis_url": "redis://:secret@critical:6380/2"}}
    queues = sluice_settings().queues
    assert queues["critical"].redis_url == "redis://:secret@critical:6380/2"
    assert queues["routine"].redis_url == queues["background"].redis_url == "redis://main:6379/0"


def test_with_every_class_on_its_own_redis_sluice_redis_url_may_be_left_out(settings):
    del settings.SLUICE_REDIS_URL
    settings.SLUICE_QUEUES = {k: {"redis_url": f"redis://{k}:6379/0"} for k in ("critical", "routine", "background")}
    assert sluice_settings().redis_url == "redis://routine:6379/0"


def test_same_redis_is_the_same_server_and_database_not_the_same_string():
    from pipeline.connections import distinct, same_redis

    assert same_redis("redis://localhost:6379/0", "redis://:pw@localhost")
    assert not same_redis("redis://localhost:6379/0", "redis://localhost:6379/1")
    assert not same_redis("redis://a:6379/0", "redis://b:6379/0")
    assert distinct(["redis://a/0", "redis://a:6379/0", "redis://b/0"]) == ["redis://a/0", "redis://b/0"]


def test_class_urls_come_from_the_environment(monkeypatch):
    import importlib

    import settings.sluice as module

    monkeypatch.setenv("REDIS_URL_CRITICAL", "redis://critical:6379/0")
    monkeypatch.delenv("SLUICE_QUEUES", raising=False)
    try:
        loaded = importlib.reload(module)
        assert loaded.SLUICE_QUEUES["critical"] == {
            "capacity": 2048,
            "wait_ms": 250,
            "redis_url": "redis://critical:6379/0",
        }
        assert "redis_url" not in loaded.SLUICE_QUEUES["routine"]
    finally:
        monkeypatch.delenv("REDIS_URL_CRITICAL")
        importlib.reload(module)
