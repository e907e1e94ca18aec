"""SLUICE_QUEUES[class]["durability"] and its replicas and timeout: defaults, and a bad value naming its key."""

import re

import pytest
from django.core.exceptions import ImproperlyConfigured

from pipeline.conf import sluice_settings


def test_every_class_is_async_by_default():
    for queue in sluice_settings().queues.values():
        assert (queue.durability, queue.replicated) == ("async", False)
        assert (queue.durability_replicas, queue.durability_timeout_ms) == (1, 100)


def test_replicated_with_its_replicas_and_timeout(settings):
    settings.SLUICE_QUEUES = {
        "critical": {"durability": "replicated", "durability_replicas": 2, "durability_timeout_ms": 50}
    }
    critical = sluice_settings().queues["critical"]
    assert critical.replicated
    assert (critical.durability_replicas, critical.durability_timeout_ms) == (2, 50)
    assert not sluice_settings().queues["routine"].replicated


@pytest.mark.parametrize(
    ("key", "value", "words"),
    [
        ("durability", "sync", "must be one of ['async', 'replicated']"),
        ("durability", True, "must be one of"),
        ("durability_replicas", 0, "must be an integer >= 1"),
        ("durability_replicas", "1", "must be an integer >= 1"),
        # WAIT 1 0 would block for ever.
        ("durability_timeout_ms", 0, "must be an integer >= 1"),
        ("durability_timeout_ms", 60_000, "must be at most 5000"),
    ],
)
def test_a_bad_durability_setting_names_its_key(settings, key, value, words):
    settings.SLUICE_QUEUES = {"routine": {key: value}}
    with pytest.raises(
        ImproperlyConfigured, match=re.escape(f"SLUICE_QUEUES['routine']['{key}']") + ".*" + re.escape(words)
    ):
        sluice_settings()
