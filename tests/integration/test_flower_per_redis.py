"""Flower sees one broker: `manage.py flower --class <class>` watches that class's Redis, and the demo runs one Flower
per distinct Redis of the classes."""

import pytest
from django.core.management.base import CommandError

from pipeline.celery import app, broker_settings
from pipeline.conf import sluice_settings
from pipeline.management.commands.flower import point_at_class
from sluice_tools.management.commands.demo import flower_classes


@pytest.fixture
def routine_on_db_5(redis_server, settings):
    base = redis_server.url.rsplit("/", 1)[0]
    settings.SLUICE_QUEUES = {**(settings.SLUICE_QUEUES or {}), "routine": {"capacity": 100, "redis_url": f"{base}/5"}}
    yield f"{base}/5"
    app.conf.update(broker_settings(sluice_settings().queues["critical"].redis_url))


def test_flower_class_points_the_broker_at_that_classs_redis(routine_on_db_5):
    assert app.conf.broker_url != routine_on_db_5
    point_at_class("routine")
    assert app.conf.broker_url == routine_on_db_5
    with app.connection_for_read() as connection:
        assert connection.as_uri(include_password=True).endswith("/5")


def test_flower_class_names_the_classes():
    with pytest.raises(CommandError, match="--class must be one of critical, routine, background, got 'urgent'"):
        point_at_class("urgent")


def test_the_demo_runs_a_flower_per_distinct_redis(monkeypatch):
    for klass in ("CRITICAL", "ROUTINE", "BACKGROUND"):
        monkeypatch.delenv(f"REDIS_URL_{klass}", raising=False)
    assert flower_classes("redis://a:6379/0") == ["critical"]
    monkeypatch.setenv("REDIS_URL_ROUTINE", "redis://b:6379/0")
    monkeypatch.setenv("REDIS_URL_BACKGROUND", "redis://b:6379/0")
    assert flower_classes("redis://a:6379/0") == ["critical", "routine"]
    monkeypatch.setenv("REDIS_URL_BACKGROUND", "redis://a:6379/0")  # critical's, spelt as REDIS_URL
    assert flower_classes("redis://a:6379/0") == ["critical", "routine"]
